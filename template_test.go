package invalidator

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/invalidator-go/invalidator/internal/own"
	"github.com/invalidator-go/invalidator/localstack/serverinfo"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
)

// node is a parsed template node with helpers for walking it. CloudFormation
// short forms (!Ref, !If...) stay as tagged nodes.
type node struct{ *yaml.Node }

func (n node) get(path ...string) node {
	cur := n.Node
	for _, key := range path {
		if cur == nil || cur.Kind != yaml.MappingNode {
			return node{}
		}
		var next *yaml.Node
		for i := 0; i+1 < len(cur.Content); i += 2 {
			if cur.Content[i].Value == key {
				next = cur.Content[i+1]
			}
		}
		cur = next
	}
	return node{cur}
}

func (n node) ok() bool { return n.Node != nil }

// value is a scalar's value, "" for a node that is not there.
func (n node) value() string {
	if !n.ok() {
		return ""
	}
	return n.Value
}

// text is the node as YAML, intrinsic functions and all, for a look inside.
func (n node) text() string {
	if !n.ok() {
		return ""
	}
	b, _ := yaml.Marshal(n.Node)
	return string(b)
}
func (n node) items() []node  { return n.children(yaml.SequenceNode, 1) }
func (n node) values() []node { return n.children(yaml.MappingNode, 2) }

func (n node) children(kind yaml.Kind, step int) []node {
	if !n.ok() || n.Kind != kind {
		return nil
	}
	var out []node
	for i := step - 1; i < len(n.Content); i += step {
		out = append(out, node{n.Content[i]})
	}
	return out
}

func (n node) keys() []string {
	var keys []string
	if n.ok() && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			keys = append(keys, n.Content[i].Value)
		}
	}
	return keys
}

func loadTemplate(t *testing.T) node {
	t.Helper()
	data, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return node{doc.Content[0]}
}

func functions(t *testing.T, tpl node) map[string]node {
	fns := map[string]node{}
	res := tpl.get("Resources")
	for _, name := range res.keys() {
		if r := res.get(name); r.get("Type").value() == "AWS::Serverless::Function" {
			fns[name] = r
		}
	}
	if len(fns) != 4 {
		t.Fatalf("found functions %v, want the SQS, SNS, stream and Kinesis ones", fns)
	}
	return fns
}

// checkSamBuild checks that sam build makes function name as make build
// does: BuildMethod makefile runs the Makefile's build-<name> at CodeUri
// with ARTIFACTS_DIR, which must build a bootstrap there with -tags
// lambda.norpc from a main package of functions/.
func checkSamBuild(t *testing.T, name string, fn node) {
	t.Helper()
	if m, dir := fn.get("Metadata", "BuildMethod").value(), fn.get("Properties", "CodeUri").value(); m != "makefile" || dir != "." {
		t.Errorf("%s: BuildMethod %q, CodeUri %q: want makefile at the module's root", name, m, dir)
		return
	}
	out, err := exec.Command("make", "-n", "build-"+name, "ARTIFACTS_DIR=/artifacts").Output()
	if err != nil {
		t.Errorf("%s: make -n build-%s: %v", name, name, err)
		return
	}
	cmd := string(out)
	pkg := regexp.MustCompile(`\./functions/[a-z-]+`).FindString(cmd)
	if !strings.Contains(cmd, " go build -tags lambda.norpc ") || !strings.Contains(cmd, `-o "/artifacts/bootstrap"`) ||
		!strings.Contains(cmd, "GOOS=linux") || pkg == "" {
		t.Errorf("%s: sam build would run %q: want a go build -tags lambda.norpc of ./functions/<name> for linux into $ARTIFACTS_DIR/bootstrap", name, cmd)
		return
	}
	if _, err := os.Stat(filepath.Join(pkg, "main.go")); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestEveryBatchSourceReportsItemFailures(t *testing.T) {
	tpl := loadTemplate(t)
	batchSources := 0
	for name, fn := range functions(t, tpl) {
		events := fn.get("Properties", "Events")
		for _, ev := range events.values() {
			switch typ := ev.get("Type").value(); typ {
			case "SQS", "DynamoDB", "Kinesis":
				batchSources++
				types := ev.get("Properties", "FunctionResponseTypes").items()
				if len(types) != 1 || types[0].Value != "ReportBatchItemFailures" {
					t.Errorf("%s: %s event without ReportBatchItemFailures: a failed record would fail its whole batch", name, typ)
				}
				if m := ev.get("Properties", "MetricsConfig", "Metrics").items(); len(m) != 1 || m[0].Value != "EventCount" {
					t.Errorf("%s: %s mapping without MetricsConfig EventCount: its polled, filtered and dropped events are not counted", name, typ)
				}
			}
			if typ := ev.get("Type").value(); typ == "DynamoDB" || typ == "Kinesis" {
				p := ev.get("Properties")
				if p.get("BisectBatchOnFunctionError").value() != "true" {
					t.Errorf("%s: stream event without BisectBatchOnFunctionError", name)
				}
				for _, key := range []string{"MaximumRetryAttempts", "MaximumRecordAgeInSeconds", "ParallelizationFactor"} {
					if !p.get(key).ok() {
						t.Errorf("%s: stream event without %s", name, key)
					}
				}
				if !p.get("DestinationConfig", "OnFailure", "Destination").ok() {
					t.Errorf("%s: stream event without an OnFailure destination: given-up records would vanish", name)
				}
			}
			if ev.get("Type").value() == "SNS" {
				if !ev.get("Properties", "RedrivePolicy", "deadLetterTargetArn").ok() {
					t.Errorf("%s: SNS subscription without a redrive policy", name)
				}
				if !fn.get("Properties", "EventInvokeConfig", "DestinationConfig", "OnFailure", "Destination").ok() {
					t.Errorf("%s: SNS-triggered function without an OnFailure destination for its async invokes", name)
				}
			}
		}
	}
	if batchSources != 4 {
		t.Fatalf("%d SQS/stream event sources, want 4: the queue, the second deletes, the stream and Kinesis", batchSources)
	}
}

// TestTemplateKinesisMirrorsTheStream: the Kinesis function, for a data stream of
// your own (KinesisStreamArn: a commit log's rows, or DynamoDB's changes),
// exists only when one is named, and is the stream function's twin: the
// same mapping settings (bisect, partial batch responses, the failure queue
// on failure), environment, statements and alarms, and it reads its stream
// by the ARN given. cfn-lint checks the template with a stream named.
func TestTemplateKinesisMirrorsTheStream(t *testing.T) {
	tpl := loadTemplate(t)
	res := tpl.get("Resources")
	fns := functions(t, tpl)
	kin, stream := fns["KinesisInvalidateFunction"], fns["StreamInvalidateFunction"]
	if !kin.ok() || !stream.ok() {
		t.Fatal("no KinesisInvalidateFunction beside StreamInvalidateFunction")
	}
	if c := kin.get("Condition").value(); c != "HasKinesis" || !offAtDefaults(tpl, kin) || !strings.Contains(tpl.get("Conditions", c).text(), "KinesisStreamArn") {
		t.Errorf("the Kinesis function has condition %q: want HasKinesis, on only when KinesisStreamArn names a stream", c)
	}
	var mappings []node
	for name, fn := range fns {
		for _, ev := range fn.get("Properties", "Events").values() {
			if ev.get("Type").value() == "Kinesis" {
				if name != "KinesisInvalidateFunction" {
					t.Errorf("%s has a Kinesis event: it would be made without HasKinesis", name)
				}
				mappings = append(mappings, ev.get("Properties"))
			}
		}
	}
	if len(mappings) != 1 {
		t.Fatalf("%d Kinesis mappings, want the Kinesis function's one", len(mappings))
	}
	p := mappings[0]
	if got := p.get("Stream").text(); got != "!Ref KinesisStreamArn\n" {
		t.Errorf("the Kinesis mapping reads %q, want KinesisStreamArn", got)
	}
	if p.get("BisectBatchOnFunctionError").value() != "true" {
		t.Error("the Kinesis mapping does not bisect a failing batch")
	}
	if types := p.get("FunctionResponseTypes").items(); len(types) != 1 || types[0].Value != "ReportBatchItemFailures" {
		t.Error("the Kinesis mapping without ReportBatchItemFailures: a failed record would fail its whole batch")
	}
	if d := p.get("DestinationConfig", "OnFailure", "Destination").text(); !strings.Contains(d, "FailureQueue") {
		t.Errorf("the Kinesis mapping's OnFailure destination is %q, want the failure queue (or the bucket): given-up records would vanish", d)
	}
	sp := stream.get("Properties", "Events", "Stream", "Properties")
	for i, key := range sp.keys() {
		if want := sp.values()[i].text(); key != "Stream" && p.get(key).text() != want {
			t.Errorf("the Kinesis mapping's %s is %q, the stream's %q", key, p.get(key).text(), want)
		}
	}
	envNames := func(fn node) []string {
		return slices.Sorted(slices.Values(fn.get("Properties", "Environment", "Variables").keys()))
	}
	if got, want := envNames(kin), envNames(stream); !slices.Equal(got, want) {
		t.Errorf("the Kinesis function's environment has %v, the stream function's %v", got, want)
	}
	sids := func(fn node) (out []string) {
		for _, pol := range fn.get("Properties", "Policies").items() {
			for _, st := range pol.get("Statement").items() {
				if st.Tag == "!If" {
					st = node{st.Content[1]}
				}
				out = append(out, st.get("Sid").value())
			}
		}
		return out
	}
	if got, want := sids(kin), sids(stream); !slices.Equal(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s == "KinesisRead" }), want) || len(got) != len(want)+1 {
		t.Errorf("the Kinesis function's statements are %v, want the stream function's %v and KinesisRead", got, want)
	}
	for _, pol := range kin.get("Properties", "Policies").items() {
		for _, st := range pol.get("Statement").items() {
			if st.get("Sid").value() == "KinesisRead" && st.get("Resource").text() != "!Ref KinesisStreamArn\n" {
				t.Errorf("the Kinesis function reads %s, want the stream KinesisStreamArn names", strings.TrimSpace(st.get("Resource").text()))
			}
		}
	}
	for _, name := range res.keys() {
		a := res.get(name)
		if a.get("Type").value() != "AWS::CloudWatch::Alarm" || !strings.Contains(a.get("Properties", "Dimensions").text(), "StreamInvalidateFunction") {
			continue
		}
		twin := false
		for _, other := range res.keys() {
			b := res.get(other)
			twin = twin || b.get("Type").value() == "AWS::CloudWatch::Alarm" && b.get("Condition").value() == "HasKinesis" &&
				strings.Contains(b.get("Properties", "Dimensions").text(), "KinesisInvalidateFunction") &&
				b.get("Properties", "MetricName").value() == a.get("Properties", "MetricName").value() &&
				b.get("Properties", "Threshold").text() == a.get("Properties", "Threshold").text()
		}
		if !twin {
			t.Errorf("%s watches the stream function, and no alarm under HasKinesis the Kinesis function's %s", name, a.get("Properties", "MetricName").value())
		}
	}
	if out := tpl.get("Outputs", "KinesisInvalidateFunctionName"); out.get("Condition").value() != "HasKinesis" || out.get("Value").text() != "!Ref KinesisInvalidateFunction\n" {
		t.Error("no KinesisInvalidateFunctionName output under HasKinesis")
	}
	if _, err := exec.LookPath("cfn-lint"); err != nil {
		if testenv.InCI() {
			t.Fatal("cfn-lint is not installed")
		}
		t.Skip("cfn-lint is not installed (pip install cfn-lint)")
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(withDefaults(t, map[string]string{"KinesisStreamArn": "arn:aws:kinesis:eu-west-1:123456789012:stream/commit-log"})), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cfn-lint", path).CombinedOutput(); err != nil {
		t.Errorf("cfn-lint with KinesisStreamArn set: %v\n%s", err, out)
	}
}

// TestSecondDeletes: every function may schedule second deletes, the SQS
// function consumes them, and what cannot be delivered is kept for replay.
func TestSecondDeletes(t *testing.T) {
	tpl := loadTemplate(t)
	if v := tpl.get("Parameters", "SecondDeleteDelay", "Default").value(); v != "2" {
		t.Errorf("SecondDeleteDelay defaults to %s, want 2 s", v)
	}
	if v := tpl.get("Globals", "Function", "Environment", "Variables", "SECOND_DELETE_DELAY").text(); !strings.Contains(v, "SecondDeleteDelay") {
		t.Errorf("SECOND_DELETE_DELAY = %q, want the parameter", v)
	}
	queue := tpl.get("Resources", "SecondDeleteQueue", "Properties")
	if !strings.Contains(queue.get("RedrivePolicy", "deadLetterTargetArn").text(), "FailureQueue") {
		t.Error("second deletes that cannot be delivered must go to the failure queue, for replay")
	}
	if v := queue.get("MaximumMessageSize").value(); v != strconv.Itoa(worker.DefaultDelayMaxBytes) {
		t.Errorf("the delay queue takes messages of %q bytes, the worker sizes them to %d (worker.DefaultDelayMaxBytes)", v, worker.DefaultDelayMaxBytes)
	}
	for name, fn := range functions(t, tpl) {
		if v := fn.get("Properties", "Environment", "Variables", "SECOND_DELETE_QUEUE_URL").text(); !strings.Contains(v, "SecondDeleteQueue") {
			t.Errorf("%s: SECOND_DELETE_QUEUE_URL = %q, want the delay queue", name, v)
		}
		sends := false
		for _, p := range fn.get("Properties", "Policies").items() {
			for _, st := range p.get("Statement").items() {
				sends = sends || st.get("Action").value() == "sqs:SendMessage" && strings.Contains(st.get("Resource").text(), "SecondDeleteQueue")
			}
		}
		if !sends {
			t.Errorf("%s may not send to the delay queue: its records would fail", name)
		}
	}
	ev := tpl.get("Resources", "SqsInvalidateFunction", "Properties", "Events", "SecondDelete", "Properties")
	if !strings.Contains(ev.get("Queue").text(), "SecondDeleteQueue") {
		t.Error("the SQS function does not consume the delay queue")
	}
}

func TestNoWildcardActions(t *testing.T) {
	var walk func(n *yaml.Node)
	checked := 0
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "NotAction" {
					t.Errorf("line %d: NotAction grants everything else", k.Line)
				}
				if k.Value == "Action" {
					actions := []*yaml.Node{v}
					if v.Kind == yaml.SequenceNode {
						actions = v.Content
					}
					for _, a := range actions {
						checked++
						if strings.Contains(a.Value, "*") {
							t.Errorf("line %d: wildcard action %q", a.Line, a.Value)
						}
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(loadTemplate(t).Node)
	if checked == 0 {
		t.Fatal("no IAM actions found: the walk is broken")
	}
}

func TestFunctionsAndCacheAreSafe(t *testing.T) {
	tpl := loadTemplate(t)
	glob := tpl.get("Globals", "Function")
	if glob.get("Runtime").value() != "provided.al2023" || glob.get("Handler").value() != "bootstrap" {
		t.Error("functions must run bootstrap on provided.al2023")
	}
	if tpl.get("Parameters", "Architecture", "Default").value() != "arm64" {
		t.Error("the architecture must default to arm64")
	}
	if v := glob.get("Environment", "Variables", "CACHE_TLS").value(); v != "true" {
		t.Errorf("CACHE_TLS = %q: the functions must speak TLS only", v)
	}
	if !glob.get("VpcConfig", "SubnetIds").ok() || !glob.get("VpcConfig", "SecurityGroupIds").ok() {
		t.Error("functions must run in the cache's VPC")
	}
	for name, fn := range functions(t, tpl) {
		checkSamBuild(t, name, fn)
		connect := false
		for _, p := range fn.get("Properties", "Policies").items() {
			for _, st := range p.get("Statement").items() {
				connect = connect || st.get("Action").value() == "elasticache:Connect"
			}
		}
		if !connect {
			t.Errorf("%s: no elasticache:Connect statement", name)
		}
	}
	cache := tpl.get("Resources", "ServerlessCache", "Properties")
	if cache.get("Engine").value() != "valkey" {
		t.Error("the cache must be ElastiCache Serverless for Valkey (TLS only)")
	}
}

// TestNoSecretInAFunctionsEnvironment: a function's environment, which
// GetFunctionConfiguration and the console show to whoever may read the
// function, holds no secret — no dynamic reference resolves one into it,
// no variable is a password, a token or a key — and the cache password's
// secret is named by its ARN, which every function may read, and nothing
// else of Secrets Manager.
func TestNoSecretInAFunctionsEnvironment(t *testing.T) {
	tpl := loadTemplate(t)
	envs := map[string]node{"Globals": tpl.get("Globals", "Function", "Environment", "Variables")}
	fns := functions(t, tpl)
	for name, fn := range fns {
		envs[name] = fn.get("Properties", "Environment", "Variables")
	}
	secretish := regexp.MustCompile(`PASSWORD|SECRET|TOKEN|CREDENTIAL|PRIVATE|ACCESS_KEY`)
	for where, env := range envs {
		for i, v := range env.values() {
			name := env.keys()[i]
			if strings.Contains(v.text(), "{{resolve:") {
				t.Errorf("%s: %s resolves a dynamic reference into the environment: %s", where, name, strings.TrimSpace(v.text()))
			}
			if secretish.MatchString(name) && !strings.HasSuffix(name, "_ARN") {
				t.Errorf("%s: %s holds a secret itself, not the ARN of one", where, name)
			}
		}
	}
	arn := envs["Globals"].get("CACHE_PASSWORD_SECRET_ARN")
	if a := arn.items(); !arn.ok() || arn.Tag != "!If" || len(a) != 3 || a[0].Value != "UsePassword" || !strings.Contains(a[1].text(), "CachePasswordSecretArn") {
		t.Errorf("CACHE_PASSWORD_SECRET_ARN = %s, want CachePasswordSecretArn with password authentication", strings.TrimSpace(arn.text()))
	}
	for name, fn := range fns {
		reads := 0
		for _, p := range fn.get("Properties", "Policies").items() {
			for _, st := range p.get("Statement").items() {
				if !strings.Contains(st.text(), "secretsmanager:") {
					continue
				}
				reads++
				if s := st.items(); st.Tag != "!If" || len(s) != 3 || s[0].Value != "UsePassword" || s[1].get("Action").value() != "secretsmanager:GetSecretValue" ||
					s[1].get("Resource").text() != "!Ref CachePasswordSecretArn\n" {
					t.Errorf("%s reads Secrets Manager by %s: want GetSecretValue on CachePasswordSecretArn alone, with password authentication", name, st.text())
				}
			}
		}
		if reads != 1 {
			t.Errorf("%s has %d statements on Secrets Manager, want the one reading the cache password", name, reads)
		}
	}
}

// TestNothingIsGivenUpWhileTheCacheMayComeBack: records that fail for good
// are parked by the functions themselves, whole, in a failure queue that
// takes the largest records; the stream retries what fails for now
// without an attempt limit, for hours; the SQS source invokes at once.
func TestNothingIsGivenUpWhileTheCacheMayComeBack(t *testing.T) {
	tpl := loadTemplate(t)
	if v := tpl.get("Globals", "Function", "Environment", "Variables", "FAILURE_QUEUE_URL"); v.value() != "FailureQueue" {
		t.Errorf("FAILURE_QUEUE_URL = %q, want the failure queue", v.value())
	}
	if v := tpl.get("Resources", "FailureQueue", "Properties", "MaximumMessageSize").value(); v != strconv.Itoa(failurequeue.MaxBytes) {
		t.Errorf("the failure queue takes messages of %s bytes, want 1 MiB: records are parked whole", v)
	}
	// A message of the queue is parked with its body as it came, and its
	// attributes beside it.
	for _, q := range []string{"Queue", "SecondDeleteQueue"} {
		if n, _ := strconv.Atoi(tpl.get("Resources", q, "Properties", "MaximumMessageSize").value()); n == 0 || n+failurequeue.MaxAttributeBytes > failurequeue.MaxBytes {
			t.Errorf("%s takes messages of %d bytes: a parked one, with %d bytes of attributes, would not fit the failure queue's %d", q, n, failurequeue.MaxAttributeBytes, failurequeue.MaxBytes)
		}
	}
	for name, fn := range functions(t, tpl) {
		parks := false
		for _, p := range fn.get("Properties", "Policies").items() {
			for _, st := range p.get("Statement").items() {
				parks = parks || st.get("Action").value() == "sqs:SendMessage" && strings.Contains(st.get("Resource").value(), "FailureQueue")
			}
		}
		if !parks {
			t.Errorf("%s may not send to the failure queue: it could not park a record", name)
		}
		for _, ev := range fn.get("Properties", "Events").values() {
			p := ev.get("Properties")
			if typ := ev.get("Type").value(); typ == "DynamoDB" || typ == "Kinesis" {
				if p.get("StartingPosition").value() != "TRIM_HORIZON" {
					t.Errorf("%s: a new stream mapping must start at TRIM_HORIZON, or it misses what was written before it", name)
				}
			}
		}
	}
	params := tpl.get("Parameters")
	if v := params.get("StreamMaximumRetryAttempts", "Default").value(); v != "-1" {
		t.Errorf("StreamMaximumRetryAttempts defaults to %s, want -1: retry until the cache is back", v)
	}
	if age, _ := strconv.Atoi(params.get("StreamMaximumRecordAgeInSeconds", "Default").value()); age < 6*3600 {
		t.Errorf("StreamMaximumRecordAgeInSeconds defaults to %d, want at least 6 h", age)
	}
	if v := params.get("SqsBatchingWindow", "Default").value(); v != "0" {
		t.Errorf("SqsBatchingWindow defaults to %s s: every message would wait that long, stale", v)
	}
}

func TestQueuesAndDeadLetters(t *testing.T) {
	tpl := loadTemplate(t)
	queue := tpl.get("Resources", "Queue", "Properties")
	if queue.get("RedrivePolicy", "maxReceiveCount").value() != "QueueMaxReceiveCount" {
		t.Error("the queue's maxReceiveCount must be the QueueMaxReceiveCount parameter")
	}
	// Messages that fail for now come back within a minute and are not
	// dead-lettered: receives must outlast hours of outage, and the queue
	// must keep them as long.
	if n, _ := strconv.Atoi(tpl.get("Parameters", "QueueMaxReceiveCount", "Default").value()); n < 100 {
		t.Errorf("QueueMaxReceiveCount defaults to %d, want at least 100", n)
	}
	if queue.get("MessageRetentionPeriod").value() != "1209600" {
		t.Error("the queue must keep messages 14 days, longer than any retry")
	}
	if dlq := queue.get("RedrivePolicy", "deadLetterTargetArn"); !dlq.ok() || !strings.Contains(dlq.value(), "DeadLetterQueue") {
		t.Errorf("the queue's DLQ is %q, want DeadLetterQueue", dlq.value())
	}
	timeouts := tpl.get("Parameters", "FunctionTimeout", "AllowedValues").items()
	mapping := tpl.get("Mappings", "VisibilityTimeouts")
	for _, timeout := range timeouts {
		fn, _ := strconv.Atoi(timeout.Value)
		vis, _ := strconv.Atoi(mapping.get(timeout.Value, "Seconds").value())
		if vis < 6*fn {
			t.Errorf("function timeout %d s gives a visibility timeout of %d s, want at least 6x", fn, vis)
		}
	}
	if len(timeouts) == 0 {
		t.Fatal("no allowed function timeouts")
	}
	for _, alarm := range []string{"DeadLetterQueueAlarm", "FailureQueueAlarm", "StreamIteratorAgeAlarm", "KinesisIteratorAgeAlarm",
		"SqsFunctionErrorsAlarm", "SnsFunctionErrorsAlarm", "StreamFunctionErrorsAlarm", "KinesisFunctionErrorsAlarm"} {
		if tpl.get("Resources", alarm, "Type").value() != "AWS::CloudWatch::Alarm" {
			t.Errorf("alarm %s is missing", alarm)
		}
	}
}

// TestQueuesThatHoldWorkAreRetained: a queue that holds changes, their dead
// letters, parked records or second deletes outlives its stack and any
// replacement (a stack deleted, a queue's property changed), and has the
// name CloudFormation gives it, so that a stack made again never collides
// with a queue left behind. Only what is kept a minute goes with the stack:
// the inspect queue's copies and the failover window. cfn-lint's I3011 finds no stateful resource without
// its policies.
func TestQueuesThatHoldWorkAreRetained(t *testing.T) {
	tpl := loadTemplate(t)
	res := tpl.get("Resources")
	work := 0
	for _, name := range res.keys() {
		r := res.get(name)
		if r.get("Type").value() != "AWS::SQS::Queue" {
			continue
		}
		deletion, replace := r.get("DeletionPolicy").value(), r.get("UpdateReplacePolicy").value()
		if r.get("Properties", "MessageRetentionPeriod").value() == "60" {
			if deletion != "Delete" || replace != "Delete" {
				t.Errorf("%s: DeletionPolicy %q, UpdateReplacePolicy %q: want Delete, said so, for what it keeps a minute", name, deletion, replace)
			}
			continue
		}
		work++
		if deletion != "Retain" && deletion != "RetainExceptOnCreate" || replace != "Retain" {
			t.Errorf("%s: DeletionPolicy %q, UpdateReplacePolicy %q: want it retained, with the work it holds", name, deletion, replace)
		}
		if n := r.get("Properties", "QueueName"); n.ok() {
			t.Errorf("%s is named %s: a stack made again would collide with the queue retained", name, strings.TrimSpace(n.text()))
		}
	}
	if work != 4 {
		t.Errorf("%d queues hold work, want the queue, its DLQ, the failure and the delay queues", work)
	}
	if _, err := exec.LookPath("cfn-lint"); err != nil {
		if testenv.InCI() {
			t.Fatal("cfn-lint is not installed")
		}
		t.Skip("cfn-lint is not installed (pip install cfn-lint)")
	}
	if out, err := exec.Command("cfn-lint", "template.yaml", "--include-checks", "I3011").CombinedOutput(); err != nil {
		t.Errorf("cfn-lint --include-checks I3011: %v\n%s", err, out)
	}
}

// TestLocalStackMatchesTheTemplate holds the local provisioning and the
// worker's local ACL to the template: the same resource names, and the
// ElastiCache user allowed at least what the tests run the worker with.
func TestLocalStackMatchesTheTemplate(t *testing.T) {
	tpl := loadTemplate(t)
	local := localEnv(t)
	// The queues that hold work have the names CloudFormation gives them
	// (TestQueuesThatHoldWorkAreRetained); the local ones, env.sh's.
	for resource, want := range map[string]struct{ prop, env string }{
		"Topic":        {"TopicName", "TOPIC_NAME"},
		"InspectQueue": {"QueueName", "INSPECT_QUEUE_NAME"},
		"ExampleTable": {"TableName", "TABLE_NAME"},
	} {
		name := strings.ReplaceAll(tpl.get("Resources", resource, "Properties", want.prop).value(), "${NamePrefix}", "")
		if name == "" || name != local[want.env] {
			t.Errorf("%s is named %q in the template and %q (%s) locally", resource, name, local[want.env], want.env)
		}
	}
	resources, err := os.ReadFile("localstack/init/ready.d/10-resources.py")
	if err != nil {
		t.Fatal(err)
	}
	for variable, want := range map[string]string{
		"MAX_RECEIVE_COUNT":             tpl.get("Parameters", "QueueMaxReceiveCount", "Default").value(),
		"VISIBILITY_TIMEOUT":            tpl.get("Mappings", "VisibilityTimeouts", tpl.get("Parameters", "FunctionTimeout", "Default").value(), "Seconds").value(),
		"SECOND_DELETE_QUEUE_MAX_BYTES": tpl.get("Resources", "SecondDeleteQueue", "Properties", "MaximumMessageSize").value(),
		"QUEUE_MAX_BYTES":               tpl.get("Resources", "Queue", "Properties", "MaximumMessageSize").value(),
	} {
		m := regexp.MustCompile(`env\("` + variable + `"\) or "(\d+)"`).FindStringSubmatch(string(resources))
		if m == nil || m[1] != want {
			t.Errorf("%s is %v locally, want the template's %s", variable, m, want)
		}
	}
	data, err := os.ReadFile("localstack/env.sh")
	if err != nil {
		t.Fatal(err)
	}
	acl := regexp.MustCompile(`export WORKER_ACL="([^"]*)"`).FindStringSubmatch(string(data))
	if acl == nil {
		t.Fatal("no WORKER_ACL in env.sh")
	}
	// AccessString is !Sub [string, {Patterns: the CacheKeyPatterns}].
	sub := tpl.get("Resources", "CacheUser", "Properties", "AccessString").items()
	if len(sub) != 2 {
		t.Fatal("the cache user's AccessString is not a !Sub of the key patterns")
	}
	access := strings.Fields(sub[0].Value)
	if !slices.Contains(access, "~${Patterns}") || !strings.Contains(sub[1].text(), "CacheKeyPatterns") {
		t.Errorf("the cache user's keys are not CacheKeyPatterns: %s", sub[0].Value)
	}
	keys := regexp.MustCompile(`export WORKER_KEYS="\$\{WORKER_KEYS:-([^}]*)\}"`).FindStringSubmatch(string(data))
	if keys == nil || strings.Join(strings.Fields(keys[1]), ",") != tpl.get("Parameters", "CacheKeyPatterns", "Default").value() {
		t.Errorf("WORKER_KEYS %v locally, want the template's CacheKeyPatterns", keys)
	}
	for _, rule := range strings.Fields(acl[1]) {
		if !slices.Contains(access, rule) {
			t.Errorf("the ElastiCache user lacks %q, which the worker is tested with", rule)
		}
	}
	// The announcements go where both users, and the services' tiers, look.
	channel := tpl.get("Parameters", "AnnounceChannel", "Default").value()
	if channel == "" || local["ANNOUNCE_CHANNEL"] != channel || !slices.Contains(access, "&"+channel) {
		t.Errorf("the announcements' channel is %q in the template, %q locally, and the user may publish on %v", channel, local["ANNOUNCE_CHANNEL"], access)
	}
	inspector := strings.Fields(tpl.get("Resources", "InspectorUser", "Properties", "AccessString").items()[0].Value)
	if !slices.Contains(inspector, "&"+channel) || !slices.Contains(inspector, "+subscribe") {
		t.Errorf("the inspector may not listen to the announcements: %v", inspector)
	}
}

// localEnv is the local stack's defaults, as localstack/env.sh exports them.
func localEnv(t *testing.T) map[string]string {
	data, err := os.ReadFile("localstack/env.sh")
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{}
	for _, m := range regexp.MustCompile(`export (\w+)="\$\{\w+:-([^}]*)\}"`).FindAllStringSubmatch(string(data), -1) {
		local[m[1]] = m[2]
	}
	return local
}

// TestInspectorOnlyReads: invalidator inspect's user reads the keys the
// worker may delete, and can change nothing; its queue keeps no backlog,
// and is none of those inspect refuses as the worker's.
func TestInspectorOnlyReads(t *testing.T) {
	tpl := loadTemplate(t)
	// CloudFormation names the worker's queues after their logical IDs, and
	// the local stack as env.sh says (X_URL's queue is X_NAME): inspect and
	// replay refuse both.
	local := localEnv(t)
	inspect := tpl.get("Resources", "InspectQueue", "Properties")
	for _, q := range own.Queues {
		if r := tpl.get("Resources", q.ID); q.ID != "" && (r.get("Type").value() != "AWS::SQS::Queue" || r.get("Properties", "QueueName").ok()) {
			t.Errorf("inspect refuses queues named after %s, which is no queue that CloudFormation names", q.ID)
		}
		if name := local[strings.TrimSuffix(q.Var, "_URL")+"_NAME"]; name != q.Name {
			t.Errorf("the local stack names %s's queue %q, inspect refuses %q", q.Var, name, q.Name)
		}
		if strings.HasSuffix(inspect.get("QueueName").value(), q.Name) || inspect.get("RedrivePolicy").ok() {
			t.Errorf("inspect would refuse its own queue, %s", inspect.get("QueueName").value())
		}
	}
	sub := tpl.get("Resources", "InspectorUser", "Properties", "AccessString").items()
	if len(sub) != 2 || !strings.Contains(sub[1].text(), "CacheKeyPatterns") {
		t.Fatal("the inspector's AccessString is not a !Sub of the key patterns")
	}
	access := strings.Fields(sub[0].Value)
	if !slices.Contains(access, "~${Patterns}") || !slices.Contains(access, "-@all") || !slices.Contains(access, "+get") {
		t.Errorf("the inspector may not read the worker's keys: %s", sub[0].Value)
	}
	for _, rule := range access {
		if strings.HasPrefix(rule, "+") && slices.Contains([]string{"+unlink", "+del", "+set", "+eval", "+evalsha", "+publish", "+@write", "+@all"}, rule) {
			t.Errorf("the inspector may %s", rule)
		}
	}
	if !strings.Contains(tpl.get("Resources", "CacheUserGroup", "Properties", "UserIds").text(), "InspectorUser") {
		t.Error("the inspector is not in the cache's user group")
	}
	if tpl.get("Resources", "InspectQueue", "Properties", "MessageRetentionPeriod").value() != "60" {
		t.Error("the inspect queue must keep messages a minute: nobody reads it between inspections")
	}
	if tpl.get("Resources", "InspectQueueSubscription", "Properties", "Endpoint").text() == "" {
		t.Error("the inspect queue is not subscribed to the topic")
	}
}

// samTransform expands the template as SAM does at deploy time, with the
// translator cfn-lint ships, and prints the result as JSON.
const samTransform = `
import json, sys
from cfnlint.decode import decode
from samtranslator.translator.transform import transform
tpl, errs = decode(sys.argv[1])
if errs: sys.exit(str(errs))
for r in tpl["Resources"].values():
    if r["Type"] == "AWS::Serverless::Function":
        r["Properties"]["CodeUri"] = "s3://bucket/key"  # sam build's job
class NoManagedPolicies:
    def load(self): return {}
print(json.dumps(transform(tpl, {}, NoManagedPolicies())))
`

// TestDeployedPoliciesHaveNoWildcardActions checks the roles SAM generates,
// policy templates expanded: a template such as SQSSendMessagePolicy
// becomes sqs:SendMessage*, which the template itself does not show. The
// template's own roles are checked too, conditional statements and all.
func TestDeployedPoliciesHaveNoWildcardActions(t *testing.T) {
	cmd := exec.Command("python3", "-c", samTransform, "template.yaml")
	cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION=us-east-1")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		if testenv.InCI() {
			t.Fatalf("SAM transform (cfn-lint's samtranslator): %s", msg)
		}
		t.Skipf("SAM transform unavailable (pip install cfn-lint): %s", msg)
	}
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				Policies []struct {
					PolicyDocument struct{ Statement []any }
				}
			}
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	generated := 0
	for name, r := range doc.Resources {
		if r.Type != "AWS::IAM::Role" {
			continue
		}
		if strings.HasSuffix(name, "FunctionRole") {
			generated++
		}
		for _, p := range r.Properties.Policies {
			for _, st := range p.PolicyDocument.Statement {
				actions := statementActions(st)
				if len(actions) == 0 {
					t.Errorf("%s: a statement without actions: %v", name, st)
				}
				for _, a := range actions {
					if s, _ := a.(string); s == "" || strings.Contains(s, "*") {
						t.Errorf("%s: action %v", name, a)
					}
				}
			}
		}
	}
	if generated != 4 {
		t.Fatalf("%d generated roles, want one per function", generated)
	}
}

// statementActions are the actions of a statement as JSON decodes it,
// those of both branches when it is an Fn::If.
func statementActions(st any) []any {
	switch v := st.(type) {
	case []any:
		var out []any
		for _, e := range v {
			out = append(out, statementActions(e)...)
		}
		return out
	case map[string]any:
		if a, ok := v["Action"]; ok {
			if list, ok := a.([]any); ok {
				return list
			}
			return []any{a}
		}
		return statementActions(v["Fn::If"])
	}
	return nil
}

// TestSQSBatchesOverTenHaveAWindow: Lambda refuses an SQS batch size over
// 10 without a batching window, so a mapping takes SqsBatchSize only beside
// SqsBatchingWindow; one without a window takes at most 10.
func TestSQSBatchesOverTenHaveAWindow(t *testing.T) {
	tpl := loadTemplate(t)
	for name, fn := range functions(t, tpl) {
		for _, ev := range fn.get("Properties", "Events").values() {
			if ev.get("Type").value() != "SQS" {
				continue
			}
			size, window := ev.get("Properties", "BatchSize").value(), ev.get("Properties", "MaximumBatchingWindowInSeconds").value()
			if n, err := strconv.Atoi(size); err == nil && n <= 10 {
				continue
			}
			if !strings.Contains(size, "SqsBatchSize") || !strings.Contains(window, "SqsBatchingWindow") {
				t.Errorf("%s: an SQS event with batch size %q and window %q: over 10 needs a window", name, size, window)
			}
		}
	}
}

// TestTheFleetsBudgetIsOnForTheWholeFleet: the fleet shares one ECPU
// budget by default, and WorkerMaxProcesses, which divides it while it
// cannot be read, covers every process the template's defaults may run
// at once — each SQS mapping's MaximumConcurrency, each stream mapping's
// shards (10 assumed) × ParallelizationFactor, the poller's tasks — so
// that the processes' fallback shares add up to no more than it. A function
// the defaults do not create (the Kinesis one) is not counted: its
// processes are named in WorkerMaxProcesses' description, for whoever
// turns it on.
func TestTheFleetsBudgetIsOnForTheWholeFleet(t *testing.T) {
	tpl := loadTemplate(t)
	params := tpl.get("Parameters")
	def := func(name string) int {
		n, err := strconv.Atoi(params.get(name, "Default").value())
		if err != nil {
			t.Fatalf("parameter %q: no number default: %v", name, err)
		}
		return n
	}
	const shards = 10
	processes := def("PollerMaxTasks")
	for name, fn := range functions(t, tpl) {
		if offAtDefaults(tpl, fn) {
			if typ := fn.get("Properties", "Events", "Stream", "Type").value(); typ == "" || !strings.Contains(params.get("WorkerMaxProcesses", "Description").value(), typ) {
				t.Errorf("%s, off at the defaults, has its %q processes left out of WorkerMaxProcesses' description", name, typ)
			}
			continue
		}
		for _, ev := range fn.get("Properties", "Events").values() {
			switch ev.get("Type").value() {
			case "SQS":
				scaling := ev.get("Properties", "ScalingConfig")
				if scaling.Tag == "!If" && len(scaling.items()) == 3 && scaling.items()[0].value() == "SqsProvisioned" {
					scaling = scaling.items()[2] // standard mode, the default
				}
				most := scaling.get("MaximumConcurrency")
				if !most.ok() {
					t.Errorf("%s: an SQS mapping without MaximumConcurrency: its processes are not bounded", name)
					continue
				}
				processes += def(most.value())
			case "DynamoDB", "Kinesis":
				processes += shards * def(ev.get("Properties", "ParallelizationFactor").value())
			}
		}
	}
	if most := def("WorkerMaxProcesses"); most < processes {
		t.Errorf("WorkerMaxProcesses defaults to %d, under the %d processes the defaults may run", most, processes)
	}
}

// offAtDefaults: the resource's condition is !Not [!Equals [!Ref P, ""]]
// and P defaults to "" — an optional resource of your own, off unless
// named. Other conditions count as on.
func offAtDefaults(tpl, r node) bool {
	cond := tpl.get("Conditions", r.get("Condition").value())
	not := cond.items()
	if cond.Tag != "!Not" || len(not) != 1 || not[0].Tag != "!Equals" {
		return false
	}
	eq := not[0].items()
	if len(eq) != 2 || eq[0].Tag != "!Ref" || eq[1].Value != "" {
		return false
	}
	d := tpl.get("Parameters", eq[0].Value, "Default")
	return d.ok() && d.Value == ""
}

// TestANewCacheRunsTheTestedEngine: the cache the template creates pins
// its Valkey major version, and its default is the one the local stack
// runs, which CI and make e2e test.
func TestANewCacheRunsTheTestedEngine(t *testing.T) {
	tpl := loadTemplate(t)
	if got := tpl.get("Resources", "ServerlessCache", "Properties", "MajorEngineVersion").text(); got != "!Ref CacheMajorEngineVersion\n" {
		t.Fatalf("ServerlessCache's MajorEngineVersion is %q: want the CacheMajorEngineVersion parameter, not AWS's default of the day", got)
	}
	def := tpl.get("Parameters", "CacheMajorEngineVersion", "Default").value()
	if named := os.Getenv("CACHE_SERVER"); named != "" && named != "valkey" {
		t.Skipf("CACHE_SERVER=%s: the stack runs an engine other than the default, by name", named)
	}
	server, err := serverinfo.Of(t.Context(), testenv.Cache(t))
	if err != nil {
		t.Fatal(err)
	}
	if name, version, _ := strings.Cut(server, " "); name != "valkey" || !strings.HasPrefix(version, def+".") {
		t.Errorf("CacheMajorEngineVersion defaults to %s, and the stack runs %s: a new cache would run an engine no test ran", def, server)
	}
}

// TestTemplateKeepsFailedBatchesInABucket: with FailedBatchBucketArn, both
// stream mappings send a batch they give up on to the bucket, whole, and
// their functions may write there; else the failure queue gets its
// coordinates. No Type on the destination: SAM would grant the queue's
// service on the bucket. cfn-lint passes with the bucket and a Kinesis
// stream named.
func TestTemplateKeepsFailedBatchesInABucket(t *testing.T) {
	tpl := loadTemplate(t)
	if c := tpl.get("Conditions", "HasFailedBatchBucket").text(); !strings.Contains(c, "FailedBatchBucketArn") {
		t.Fatalf("HasFailedBatchBucket is %q: want it on when FailedBatchBucketArn names a bucket", c)
	}
	mappings := 0
	for name, fn := range functions(t, tpl) {
		for _, ev := range fn.get("Properties", "Events").values() {
			if typ := ev.get("Type").value(); typ != "DynamoDB" && typ != "Kinesis" {
				continue
			}
			mappings++
			on := ev.get("Properties", "DestinationConfig", "OnFailure")
			if d := on.get("Destination").text(); !strings.Contains(d, "HasFailedBatchBucket") || !strings.Contains(d, "FailedBatchBucketArn") || !strings.Contains(d, "FailureQueue") {
				t.Errorf("%s: on failure to %q, want the bucket if named, else the failure queue", name, d)
			}
			if on.get("Type").ok() {
				t.Errorf("%s: the on-failure destination has a Type: SAM grants that service's action on whichever ARN it is", name)
			}
			if p := fn.get("Properties", "Policies").text(); !strings.Contains(p, "s3:PutObject") || !strings.Contains(p, "FailedBatchBucketArn") {
				t.Errorf("%s: no s3:PutObject on FailedBatchBucketArn: the mapping could not keep a failed batch", name)
			}
		}
	}
	if mappings != 2 {
		t.Fatalf("%d stream mappings, want the stream's and Kinesis's", mappings)
	}
	needCfnLint(t)
	lintWithDefaults(t, map[string]string{"FailedBatchBucketArn": "arn:aws:s3:::invalidator-failed-batches",
		"KinesisStreamArn": "arn:aws:kinesis:eu-west-1:123456789012:stream/commit-log"})
}

// TestTemplateOffersSqsProvisionedMode: the SQS mapping of changes takes
// provisioned mode on a parameter, off by default, and then no maximum
// concurrency, which Lambda refuses beside it; cfn-lint passes either way.
func TestTemplateOffersSqsProvisionedMode(t *testing.T) {
	tpl := loadTemplate(t)
	if v := tpl.get("Parameters", "SqsProvisionedMinimum", "Default").value(); v != "0" {
		t.Errorf("SqsProvisionedMinimum defaults to %q, want 0: standard mode", v)
	}
	if c := tpl.get("Conditions", "SqsProvisioned").text(); !strings.Contains(c, "SqsProvisionedMinimum") {
		t.Fatalf("SqsProvisioned is %q: want it on when SqsProvisionedMinimum is not 0", c)
	}
	ev := tpl.get("Resources", "SqsInvalidateFunction", "Properties", "Events", "Queue", "Properties")
	pollers, scaling := ev.get("ProvisionedPollerConfig").text(), ev.get("ScalingConfig").text()
	if !strings.Contains(pollers, "SqsProvisioned") || !strings.Contains(pollers, "SqsProvisionedMinimum") || !strings.Contains(pollers, "SqsProvisionedMaximum") {
		t.Errorf("the queue's mapping has ProvisionedPollerConfig %q: want the pollers when SqsProvisioned", pollers)
	}
	if !strings.Contains(scaling, "SqsProvisioned") || !strings.Contains(scaling, "AWS::NoValue") || !strings.Contains(scaling, "SqsMaximumConcurrency") {
		t.Errorf("the queue's mapping has ScalingConfig %q: want none in provisioned mode, SqsMaximumConcurrency else", scaling)
	}
	needCfnLint(t)
	lintWithDefaults(t, map[string]string{"SqsProvisionedMinimum": "2"})
}

// TestTheWindowsSlotsMatch: the failover window's slots are queues that
// keep a message 60 s, as many in the template as locally, and the
// worker's FAILOVER_WINDOW_QUEUE_URL lists them all in their order, the
// functions' and the poller's alike: a slot left out would never be read.
func TestTheWindowsSlotsMatch(t *testing.T) {
	tpl := loadTemplate(t)
	var slots []string
	res := tpl.get("Resources")
	for _, name := range res.keys() {
		if strings.HasPrefix(name, "FailoverWindowQueue") {
			slots = append(slots, name)
			if v := res.get(name, "Properties", "MessageRetentionPeriod").value(); v != "60" {
				t.Errorf("%s keeps a message %s s, want 60: the slots' width is 60 s/(slots-1)", name, v)
			}
		}
	}
	if len(slots) < 2 {
		t.Fatalf("the window is %v: want slots", slots)
	}
	want := "!Ref " + strings.Join(slots, ", !Ref ")
	for _, env := range []node{tpl.get("Globals", "Function", "Environment", "Variables", "FAILOVER_WINDOW_QUEUE_URL"), tpl.get("Outputs", "FailoverWindowQueueUrl", "Value")} {
		if got := env.text(); !strings.Contains(got, want) {
			t.Errorf("FAILOVER_WINDOW_QUEUE_URL is %q, want the slots in order: %s", got, want)
		}
	}
	if task := tpl.get("Resources", "PollerTaskDefinition").text(); !strings.Contains(task, want) {
		t.Errorf("the poller's FAILOVER_WINDOW_QUEUE_URL does not list the slots in order: %s", want)
	}
	if local := strings.Split(localEnv(t)["WINDOW_QUEUE_URL"], ","); len(local) != len(slots) {
		t.Errorf("the local window is %d slots (%v), the template's %d", len(local), local, len(slots))
	}
	resources, err := os.ReadFile("localstack/init/ready.d/10-resources.py")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(regexp.MustCompile(`for suffix in \(([^)]*)\)`).FindString(string(resources)), `"`) / 2; n != len(slots) {
		t.Errorf("10-resources.py makes %d window slots, the template %d", n, len(slots))
	}
}
