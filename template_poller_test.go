package invalidator

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker/poller"
)

// The tests of the poller's part of template.yaml (CreatePoller): its
// names all contain Template, so go test -run Template runs them.

// refs are the logical IDs and parameters a node refers to: !Ref, !GetAtt
// and the ${...} of !Sub, less a !Sub's own variables.
func refs(n node) []string {
	if !n.ok() {
		return nil
	}
	var out []string
	sub := regexp.MustCompile(`\$\{([^}.]+)[^}]*\}`)
	switch {
	case n.Tag == "!Ref":
		return []string{n.Value}
	case n.Tag == "!GetAtt":
		return []string{strings.Split(n.Value, ".")[0]}
	case n.Tag == "!Sub" && n.Kind == yaml.ScalarNode:
		for _, m := range sub.FindAllStringSubmatch(n.Value, -1) {
			out = append(out, m[1])
		}
		return out
	case n.Tag == "!Sub":
		items := n.items()
		local := items[1].keys()
		for _, m := range sub.FindAllStringSubmatch(items[0].Value, -1) {
			if !slices.Contains(local, m[1]) {
				out = append(out, m[1])
			}
		}
		return append(out, refs(items[1])...)
	}
	for _, c := range n.Content {
		out = append(out, refs(node{c})...)
	}
	return out
}

// refSet is refs as a sorted set, pseudo parameters left out.
func refSet(n node) []string {
	var out []string
	for _, r := range refs(n) {
		if !strings.HasPrefix(r, "AWS::") && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// scalars are every scalar under n, the values intrinsic functions take.
func scalars(n node) []string {
	if !n.ok() {
		return nil
	}
	if len(n.Content) == 0 {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, scalars(node{c})...)
	}
	return out
}

// implies tells whether condition cond holds only when target does.
func implies(tpl node, cond, target string) bool {
	if cond == target {
		return true
	}
	c := tpl.get("Conditions", cond)
	if c.Tag != "!And" {
		return false
	}
	for _, it := range c.items() {
		if it.Tag == "!Condition" && implies(tpl, it.Value, target) {
			return true
		}
	}
	return false
}

// pseudo are the pseudo parameters eval knows, as in eu-west-1.
var pseudo = map[string]string{"AWS::Partition": "aws", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012", "AWS::URLSuffix": "amazonaws.com"}

// eval evaluates the intrinsic functions the template derives names and
// ARNs from parameters with (!Ref, !Split, !Select, !Sub), for params.
func eval(t *testing.T, n node, params map[string]string) any {
	t.Helper()
	lookup := func(name string, vars map[string]string) string {
		for _, m := range []map[string]string{vars, params, pseudo} {
			if v, ok := m[name]; ok {
				return v
			}
		}
		t.Fatalf("eval: %s has no value", name)
		return ""
	}
	str := func(n node) string {
		s, ok := eval(t, n, params).(string)
		if !ok {
			t.Fatalf("eval: %s is not a string", n.text())
		}
		return s
	}
	sub := func(tmpl string, vars map[string]string) string {
		return regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(tmpl, func(v string) string { return lookup(v[2:len(v)-1], vars) })
	}
	switch n.Tag {
	case "!Ref":
		return lookup(n.Value, nil)
	case "!Split":
		return strings.Split(str(n.items()[1]), n.items()[0].Value)
	case "!Select":
		i, _ := strconv.Atoi(n.items()[0].Value)
		list, ok := eval(t, n.items()[1], params).([]string)
		if !ok || i >= len(list) {
			t.Fatalf("eval: !Select %d of %v", i, list)
		}
		return list[i]
	case "!Sub":
		if n.Kind == yaml.ScalarNode {
			return sub(n.Value, nil)
		}
		vars := map[string]string{}
		for k, v := range n.items()[1].values() {
			vars[n.items()[1].keys()[k]] = str(v)
		}
		return sub(n.items()[0].Value, vars)
	case "!!str", "!!int":
		return n.Value
	}
	t.Fatalf("eval: cannot evaluate %s", n.text())
	return nil
}

func pollerContainer(t *testing.T, tpl node) node {
	t.Helper()
	cs := tpl.get("Resources", "PollerTaskDefinition", "Properties", "ContainerDefinitions").items()
	if len(cs) != 1 {
		t.Fatalf("%d containers in the poller's task, want 1", len(cs))
	}
	return cs[0]
}

// containerEnv is the poller container's environment by name.
func containerEnv(c node) map[string]node {
	env := map[string]node{}
	for _, kv := range c.get("Environment").items() {
		if kv.Tag == "!If" { // [condition, variable, AWS::NoValue]: the variable, when it holds
			kv = kv.items()[1]
		}
		env[kv.get("Name").value()] = kv.get("Value")
	}
	return env
}

// policy is what a role's inline policies allow: for each action, the
// statements that allow it, and when, the condition of the !If that holds
// a statement allowed only then.
func policy(t *testing.T, role node) (allowed map[string][]node, when map[string]string) {
	t.Helper()
	if role.get("Properties", "ManagedPolicyArns").ok() {
		t.Error("managed policies allow more than the template shows")
	}
	allowed, when = map[string][]node{}, map[string]string{}
	for _, p := range role.get("Properties", "Policies").items() {
		for _, st := range p.get("PolicyDocument", "Statement").items() {
			cond := ""
			if st.Tag == "!If" { // [condition, statement, AWS::NoValue]
				cond, st = st.items()[0].Value, st.items()[1]
			}
			if st.get("Effect").value() != "Allow" || st.get("NotResource").ok() || st.get("Condition").ok() {
				t.Errorf("statement %s: want a plain Allow", st.get("Sid").value())
			}
			actions := st.get("Action").items()
			if st.get("Action").Kind == yaml.ScalarNode {
				actions = []node{st.get("Action")}
			}
			for _, a := range actions {
				allowed[a.Value] = append(allowed[a.Value], st)
				if cond != "" {
					when[a.Value] = cond
				}
			}
		}
	}
	return allowed, when
}

func assumedByECSTasks(t *testing.T, role node) node {
	t.Helper()
	sts := role.get("Properties", "AssumeRolePolicyDocument", "Statement").items()
	if len(sts) != 1 || sts[0].get("Principal", "Service").value() != "ecs-tasks.amazonaws.com" || sts[0].get("Action").value() != "sts:AssumeRole" {
		t.Fatalf("the role's trust policy is not ECS tasks': %s", role.get("Properties", "AssumeRolePolicyDocument").text())
	}
	return sts[0]
}

// TestTemplatePollerIsOptIn: nothing of the poller exists unless
// CreatePoller, and it needs an image and the queue.
func TestTemplatePollerIsOptIn(t *testing.T) {
	tpl := loadTemplate(t)
	if v := tpl.get("Parameters", "CreatePoller", "Default").value(); v != "false" {
		t.Errorf("CreatePoller defaults to %q, want false", v)
	}
	cond := tpl.get("Conditions", "CreatePoller").text()
	if !strings.Contains(cond, "!Ref CreatePoller") || !strings.Contains(cond, "HasQueue") {
		t.Errorf("the CreatePoller condition %q does not need the parameter and the queue", cond)
	}
	rule := tpl.get("Rules", "PollerNeedsImageAndQueue")
	if !strings.Contains(rule.get("RuleCondition").text(), "CreatePoller") || !slices.Contains(refs(rule.get("Assertions")), "PollerImageUri") {
		t.Error("no rule refuses CreatePoller without PollerImageUri")
	}
	res := tpl.get("Resources")
	found := 0
	for _, name := range res.keys() {
		r := res.get(name)
		typ := r.get("Type").value()
		poller := strings.Contains(name, "Poller") || slices.ContainsFunc(refs(r), func(ref string) bool { return strings.Contains(ref, "Poller") })
		for _, prefix := range []string{"AWS::ECS::", "AWS::ApplicationAutoScaling::", "AWS::Logs::", "AWS::IAM::Role"} {
			poller = poller || strings.HasPrefix(typ, prefix)
		}
		if !poller {
			continue
		}
		found++
		if c := r.get("Condition").value(); !implies(tpl, c, "CreatePoller") {
			t.Errorf("%s (%s) has condition %q: it exists without CreatePoller", name, typ, c)
		}
	}
	if found < 20 {
		t.Fatalf("%d poller resources found: the search is broken", found)
	}
	outs := tpl.get("Outputs")
	for _, name := range outs.keys() {
		o := outs.get(name)
		if strings.Contains(name, "Poller") && !implies(tpl, o.get("Condition").value(), "CreatePoller") {
			t.Errorf("output %s exists without CreatePoller", name)
		}
	}
}

// TestTemplatePollerTask: a Fargate task of the functions' architecture,
// running the image's own entrypoint as a non-root user on a read-only
// root filesystem, logging to CloudWatch, health-checked by the poller
// itself, and given the time to drain when stopped.
func TestTemplatePollerTask(t *testing.T) {
	tpl := loadTemplate(t)
	td := tpl.get("Resources", "PollerTaskDefinition", "Properties")
	if td.get("RequiresCompatibilities").text() != "[FARGATE]\n" || td.get("NetworkMode").value() != "awsvpc" {
		t.Error("the poller's task is not a Fargate task")
	}
	arch := td.get("RuntimePlatform", "CpuArchitecture").items()
	if len(arch) != 3 || arch[1].Value != "ARM64" || arch[2].Value != "X86_64" || tpl.get("Conditions", arch[0].Value).text() != "!Equals [!Ref Architecture, arm64]\n" {
		t.Errorf("CpuArchitecture %s does not follow Architecture", td.get("RuntimePlatform", "CpuArchitecture").text())
	}
	if td.get("ExecutionRoleArn").value() != "PollerExecutionRole.Arn" || td.get("TaskRoleArn").value() != "PollerTaskRole.Arn" {
		t.Error("the task does not run with the poller's execution and task roles")
	}
	c := pollerContainer(t, tpl)
	if c.get("Image").Tag != "!Ref" || c.get("Image").value() != "PollerImageUri" {
		t.Errorf("image %s, want PollerImageUri", c.get("Image").text())
	}
	if c.get("EntryPoint").ok() || c.get("Command").ok() {
		t.Error("the task must run the image's own entrypoint")
	}
	if uid, _, _ := strings.Cut(c.get("User").value(), ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("User %q: the poller must not run as root", c.get("User").value())
	}
	if c.get("ReadonlyRootFilesystem").value() != "true" || c.get("Essential").value() != "true" {
		t.Error("the container must be essential, with a read-only root filesystem")
	}
	logs := c.get("LogConfiguration")
	if logs.get("LogDriver").value() != "awslogs" || logs.get("Options", "awslogs-group").value() != "PollerLogGroup" ||
		!logs.get("Options", "awslogs-region").ok() || !logs.get("Options", "awslogs-stream-prefix").ok() {
		t.Errorf("logs %s: want awslogs to the poller's log group, with a stream prefix (Fargate needs one)", logs.text())
	}

	// The health check is the binary's own -healthcheck, in exec form:
	// an image without a shell runs it (functions/healthcheck_test.go).
	cmd := c.get("HealthCheck", "Command").items()
	if len(cmd) != 3 || cmd[0].Value != "CMD" || cmd[1].Tag != "!Ref" || cmd[2].Value != "-healthcheck" {
		t.Fatalf("health check %s, want [CMD, the binary, -healthcheck]", c.get("HealthCheck").text())
	}
	if bin := tpl.get("Parameters", cmd[1].Value, "Default").value(); !strings.HasPrefix(bin, "/") {
		t.Errorf("the health check runs %q, want an absolute path", bin)
	}
	env := containerEnv(c)
	if addr := env["HEALTH_ADDR"].value(); !strings.HasSuffix(addr, ":8080") {
		t.Errorf("HEALTH_ADDR %q: the check asks :8080", addr)
	}

	// Stopping, the poller waits out its long poll, then the batch in
	// flight and its delete and hand-back, which get 10 s each
	// (worker/poller).
	opts, err := poller.OptionsFromEnv(func(k string) string {
		v, ok := env[k]
		switch {
		case !ok:
			return ""
		case v.Kind == yaml.ScalarNode && strings.HasPrefix(v.Tag, "!!"): // a literal
			return v.Value
		}
		return "set by the template"
	})
	if err != nil {
		t.Fatalf("the task's environment: %v", err)
	}
	stop, _ := strconv.Atoi(c.get("StopTimeout").value())
	drain := opts.WaitTime + opts.BatchTimeout + 20*time.Second
	if time.Duration(stop)*time.Second <= drain || stop > 120 {
		t.Errorf("stopTimeout %d s, want more than the drain's %v and at most Fargate's 120 s", stop, drain)
	}
}

// TestTemplatePollerEnvironmentIsTheFunctions: the poller is configured as
// the functions are, its password a secret the execution role reads.
func TestTemplatePollerEnvironmentIsTheFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	c := pollerContainer(t, tpl)
	env := containerEnv(c)
	global := tpl.get("Globals", "Function", "Environment", "Variables")
	for i, v := range global.values() {
		name := global.keys()[i]
		got, ok := env[name]
		if name == "CACHE_PASSWORD_SECRET_ARN" { // the functions' is an !If of it, the poller's an !If of the variable
			ok = ok && slices.Equal(refs(got), []string{"CachePasswordSecretArn"}) && strings.Contains(v.text(), "CachePasswordSecretArn")
		} else {
			ok = ok && got.text() == v.text()
		}
		if !ok {
			t.Errorf("%s is %q for the poller, %q for the functions", name, got.text(), v.text())
		}
	}
	// The password read by the poller itself, as the functions read it, and
	// read again when the cache refuses it: never resolved into the task.
	if c.get("Secrets").ok() {
		t.Errorf("secrets %s: the poller reads the password by CACHE_PASSWORD_SECRET_ARN, as the functions do", c.get("Secrets").text())
	}
	if v := env["SECOND_DELETE_QUEUE_URL"]; !slices.Equal(refs(v), []string{"SecondDeleteQueue"}) {
		t.Errorf("SECOND_DELETE_QUEUE_URL = %s, want the delay queue, which the poller consumes too", v.text())
	}
	q := env["QUEUE_URL"].items()
	if len(q) != 3 || q[0].Value != "CreateQueue" || q[1].value() != "Queue" {
		t.Fatalf("QUEUE_URL = %s, want the queue or QueueArn's URL", env["QUEUE_URL"].text())
	}
	if url := eval(t, q[2], map[string]string{"QueueArn": "arn:aws:sqs:eu-west-1:111122223333:changes"}); url != "https://sqs.eu-west-1.amazonaws.com/111122223333/changes" {
		t.Errorf("QueueArn's URL is %v", url)
	}
}

// TestTemplatePollerTaskRoleIsExactlyWhatThePollerDoes: receive, delete and
// hand back on its two queues, send to the failure and the delay queues,
// log in to the cache as the functions do; nothing on "*".
func TestTemplatePollerTaskRoleIsExactlyWhatThePollerDoes(t *testing.T) {
	tpl := loadTemplate(t)
	role := tpl.get("Resources", "PollerTaskRole")
	if trust := assumedByECSTasks(t, role); !slices.Contains(refs(trust.get("Condition", "StringEquals", "aws:SourceAccount")), "AWS::AccountId") {
		t.Error("the task role may be assumed for another account's tasks: want aws:SourceAccount")
	}
	consumed := []string{"Queue", "QueueArn", "SecondDeleteQueue"}
	// The failover window is read and shown again, never deleted from: its
	// retention ends its messages.
	window := []string{"FailoverWindowQueue", "FailoverWindowQueue2", "FailoverWindowQueue3", "FailoverWindowQueue4"}
	read := append(slices.Clone(window), "Queue", "QueueArn", "SecondDeleteQueue")
	want := map[string][]string{
		"sqs:ReceiveMessage":            read,
		"sqs:DeleteMessage":             consumed,
		"sqs:ChangeMessageVisibility":   read,
		"sqs:SendMessage":               append(slices.Clone(window), "FailureQueue", "SecondDeleteQueue"),
		"elasticache:Connect":           {"CacheArn", "CacheName", "CacheUser", "CacheUserArn", "ServerlessCache"},
		"secretsmanager:GetSecretValue": {"CachePasswordSecretArn"},
	}
	allowed, when := policy(t, role)
	if got := slices.Sorted(maps.Keys(allowed)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Errorf("the task role allows %v, want exactly %v", got, slices.Sorted(maps.Keys(want)))
	}
	if !maps.Equal(when, map[string]string{"secretsmanager:GetSecretValue": "UsePassword"}) {
		t.Errorf("the task role allows %v only under conditions: want the secret read with password authentication only", when)
	}
	for action, sts := range allowed {
		var resources []string
		for _, st := range sts {
			if slices.ContainsFunc(scalars(st.get("Resource")), func(s string) bool { return strings.Contains(s, "*") }) || !st.get("Resource").ok() {
				t.Errorf("%s on %s: want named resources", action, st.get("Resource").text())
			}
			resources = append(resources, refSet(st.get("Resource"))...)
		}
		slices.Sort(resources)
		if resources = slices.Compact(resources); !slices.Equal(resources, want[action]) {
			t.Errorf("%s on %v, want %v", action, resources, want[action])
		}
	}
	// The cache login is the functions' statement, to the letter.
	var fn node
	for _, p := range tpl.get("Resources", "SqsInvalidateFunction", "Properties", "Policies").items() {
		for _, st := range p.get("Statement").items() {
			if st.get("Action").value() == "elasticache:Connect" {
				fn = st
			}
		}
	}
	if c := allowed["elasticache:Connect"]; len(c) != 1 || c[0].get("Resource").text() != fn.get("Resource").text() {
		t.Error("the poller logs in to the cache on other resources than the functions")
	}
}

// TestTemplatePollerExecutionRole: the Fargate agent pulls the poller's
// image from its repository and writes its log group; only the registry
// login is on "*", which its API requires.
func TestTemplatePollerExecutionRole(t *testing.T) {
	tpl := loadTemplate(t)
	role := tpl.get("Resources", "PollerExecutionRole")
	assumedByECSTasks(t, role)
	want := map[string][]string{
		"ecr:GetAuthorizationToken":  nil,
		"ecr:BatchGetImage":          {"PollerImageUri"},
		"ecr:GetDownloadUrlForLayer": {"PollerImageUri"},
		"logs:CreateLogStream":       {"PollerLogGroup"},
		"logs:PutLogEvents":          {"PollerLogGroup"},
	}
	allowed, when := policy(t, role)
	if got := slices.Sorted(maps.Keys(allowed)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Errorf("the execution role allows %v, want exactly %v", got, slices.Sorted(maps.Keys(want)))
	}
	if len(when) > 0 {
		t.Errorf("the execution role allows %v under conditions: it needs it all", when)
	}
	var pull node
	for action, sts := range allowed {
		if len(sts) != 1 {
			t.Fatalf("%s in %d statements", action, len(sts))
		}
		res := sts[0].get("Resource")
		star := slices.ContainsFunc(scalars(res), func(s string) bool { return strings.Contains(s, "*") })
		if action == "ecr:GetAuthorizationToken" {
			if res.value() != "*" || len(sts[0].get("Action").items()) > 0 {
				t.Errorf("the registry login is on %s, alone in its statement: want *, which it needs, and nothing else with it", res.text())
			}
			continue
		}
		if star || !slices.Equal(refSet(res), want[action]) {
			t.Errorf("%s on %s, want %v", action, res.text(), want[action])
		}
		if action == "ecr:BatchGetImage" {
			pull = res
		}
	}
	for uri, want := range map[string]string{
		"123456789012.dkr.ecr.eu-west-1.amazonaws.com/invalidator-poller:v1.2":                   "arn:aws:ecr:eu-west-1:123456789012:repository/invalidator-poller",
		"123456789012.dkr.ecr.eu-west-1.amazonaws.com/poller@sha256:" + strings.Repeat("ab", 32): "arn:aws:ecr:eu-west-1:123456789012:repository/poller",
		"111122223333.dkr.ecr.us-east-2.amazonaws.com/my.poller":                                 "arn:aws:ecr:us-east-2:111122223333:repository/my.poller",
	} {
		if !regexp.MustCompile(tpl.get("Parameters", "PollerImageUri", "AllowedPattern").value()).MatchString(uri) {
			t.Errorf("PollerImageUri refuses %s", uri)
		}
		if arn := eval(t, pull, map[string]string{"PollerImageUri": uri}); arn != want {
			t.Errorf("the image %s is pulled from %v, want %s", uri, arn, want)
		}
	}
	// A repository in a namespace would be scoped to its first part.
	if regexp.MustCompile(tpl.get("Parameters", "PollerImageUri", "AllowedPattern").value()).MatchString("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/poller:v1") {
		t.Error("PollerImageUri takes a repository name with /, which the pull permission cannot scope")
	}
}

// TestTemplatePollerNetwork: the service runs in the functions' subnets,
// with a group allowed to the cache as theirs is, and starts once the
// endpoints a task without NAT needs exist.
func TestTemplatePollerNetwork(t *testing.T) {
	tpl := loadTemplate(t)
	res := tpl.get("Resources")
	svc := res.get("PollerService", "Properties")
	if svc.get("LaunchType").value() != "FARGATE" || svc.get("TaskDefinition").value() != "PollerTaskDefinition" {
		t.Error("the service does not run the poller's task on Fargate")
	}
	if cl := svc.get("Cluster").items(); len(cl) != 3 || cl[0].Value != "CreateEcsCluster" || cl[1].value() != "EcsCluster" || cl[2].value() != "EcsClusterArn" {
		t.Errorf("the service's cluster %s: want the created one or EcsClusterArn", svc.get("Cluster").text())
	}
	if n, _ := strconv.Atoi(svc.get("DesiredCount").value()); svc.get("DesiredCount").ok() && n < 1 {
		t.Errorf("DesiredCount %d: want at least one task", n)
	}
	if svc.get("DeploymentConfiguration", "DeploymentCircuitBreaker", "Rollback").value() != "true" {
		t.Error("a deployment whose tasks cannot start must roll back")
	}
	vpc := svc.get("NetworkConfiguration", "AwsvpcConfiguration")
	if vpc.get("Subnets").text() != tpl.get("Globals", "Function", "VpcConfig", "SubnetIds").text() {
		t.Errorf("the poller runs in %s, not in the functions' subnets", vpc.get("Subnets").text())
	}
	if vpc.get("SecurityGroups").text() != "[!Ref PollerSecurityGroup]\n" || vpc.get("AssignPublicIp").value() != "DISABLED" {
		t.Errorf("the poller's network %s: want its own group, no public IP", vpc.text())
	}
	egress := res.get("PollerSecurityGroup", "Properties", "SecurityGroupEgress").items()
	if len(egress) == 0 || egress[0].text() != res.get("FunctionSecurityGroup", "Properties", "SecurityGroupEgress").items()[0].text() {
		t.Error("the poller's group does not reach the cache as the functions' group does")
	}
	ingress := func(name, to, port string) {
		p := res.get(name, "Properties")
		if p.get("GroupId").value() != to || p.get("SourceSecurityGroupId").value() != "PollerSecurityGroup" || p.get("FromPort").value() != port {
			t.Errorf("%s: want %s to let the poller in on %s", name, to, port)
		}
	}
	ingress("CacheIngressFromPoller", "CacheSecurityGroup", "6379")
	ingress("SqsEndpointIngressFromPoller", "SqsEndpointSecurityGroup", "443")

	// Its tasks pull their image, open their log stream and read their
	// secret before anything retries: they start after the endpoints.
	if v := tpl.get("Parameters", "CreatePollerEndpoints", "Default").value(); v != tpl.get("Parameters", "CreateSqsEndpoint", "Default").value() {
		t.Errorf("CreatePollerEndpoints defaults to %s, unlike CreateSqsEndpoint", v)
	}
	ready := res.get("PollerService", "Metadata")
	services := map[string]string{}
	for _, name := range res.keys() {
		r := res.get(name)
		if r.get("Type").value() != "AWS::EC2::VPCEndpoint" || name == "SqsEndpoint" || name == "SecretsManagerEndpoint" {
			continue // the functions' too, below
		}
		p := r.get("Properties")
		service := strings.TrimPrefix(p.get("ServiceName").value(), "com.amazonaws.${AWS::Region}.")
		services[service] = p.get("VpcEndpointType").value()
		if !slices.Contains(refs(ready), name) {
			t.Errorf("the service does not wait for %s", name)
		}
		if service == "s3" {
			if !slices.Equal(refs(p.get("RouteTableIds")), []string{"PollerRouteTableIds"}) {
				t.Error("the S3 gateway endpoint is not on PollerRouteTableIds")
			}
			continue
		}
		if p.get("PrivateDnsEnabled").value() != "true" || p.get("SubnetIds").text() != vpc.get("Subnets").text() {
			t.Errorf("%s: want private DNS, in the poller's subnets", name)
		}
		if sg := p.get("SecurityGroupIds").items(); len(sg) != 1 || res.get(sg[0].Value, "Properties", "SecurityGroupIngress").items()[0].get("SourceSecurityGroupId").value() != "PollerSecurityGroup" {
			t.Errorf("%s does not let the poller in", name)
		}
		if c := r.get("Condition").value(); !implies(tpl, c, "CreatePollerEndpoints") {
			t.Errorf("%s has condition %s: want CreatePollerEndpoints", name, c)
		}
	}
	if !maps.Equal(services, map[string]string{"ecr.api": "Interface", "ecr.dkr": "Interface", "logs": "Interface", "s3": "Gateway"}) {
		t.Errorf("the poller's endpoints: %v, want ECR's api and dkr, logs, and S3's gateway", services)
	}
	// Secrets Manager's, with password authentication, is the functions'
	// and the poller's: a VPC takes one with private DNS.
	secrets := res.get("SecretsManagerEndpoint")
	if c := secrets.get("Condition").value(); !implies(tpl, c, "UsePassword") {
		t.Error("the Secrets Manager endpoint is only for password authentication")
	}
	if sg := secrets.get("Properties", "SecurityGroupIds").items(); len(sg) != 1 ||
		res.get(sg[0].Value, "Properties", "SecurityGroupIngress").items()[0].get("SourceSecurityGroupId").value() != "FunctionSecurityGroup" {
		t.Error("the Secrets Manager endpoint does not let the functions in")
	}
	ingress("SecretsEndpointIngressFromPoller", "SecretsEndpointSecurityGroup", "443")
	for _, name := range []string{"SqsEndpointIngressFromPoller", "CacheIngressFromPoller", "SecretsManagerEndpoint", "SecretsEndpointIngressFromPoller"} {
		if !slices.Contains(refs(ready), name) {
			t.Errorf("the service does not wait for %s", name)
		}
	}
}

// TestTemplatePollerScalesOnBacklogPerTask: AWS's metric-math target
// tracking, the messages waiting in the poller's queues over its running
// tasks, between PollerMinTasks (at least one) and PollerMaxTasks; the
// created cluster has Container Insights, which counts the tasks.
func TestTemplatePollerScalesOnBacklogPerTask(t *testing.T) {
	tpl := loadTemplate(t)
	res := tpl.get("Resources")
	settings := res.get("EcsCluster", "Properties", "ClusterSettings").items()
	if len(settings) != 1 || settings[0].get("Name").value() != "containerInsights" || !slices.Contains([]string{"enabled", "enhanced"}, settings[0].get("Value").value()) {
		t.Errorf("the created cluster's settings %s: want Container Insights", res.get("EcsCluster", "Properties").text())
	}
	if c := tpl.get("Conditions", res.get("EcsCluster", "Condition").value()).text(); !strings.Contains(c, `!Equals [!Ref EcsClusterArn, ""]`) {
		t.Errorf("the cluster is created when %s: want when EcsClusterArn is empty", c)
	}
	target := res.get("PollerScalableTarget", "Properties")
	if target.get("ScalableDimension").value() != "ecs:service:DesiredCount" || !slices.Contains(refs(target.get("ResourceId")), "PollerService") {
		t.Error("the scalable target is not the poller service's task count")
	}
	if target.get("MinCapacity").value() != "PollerMinTasks" || target.get("MaxCapacity").value() != "PollerMaxTasks" {
		t.Error("the task count is not bounded by PollerMinTasks and PollerMaxTasks")
	}
	if n, _ := strconv.Atoi(tpl.get("Parameters", "PollerMinTasks", "MinValue").value()); n < 1 {
		t.Errorf("PollerMinTasks may be %d: with no task there is no running-task count to scale out from", n)
	}
	cluster := eval(t, target.get("ResourceId").items()[1].get("Cluster").items()[2], map[string]string{"EcsClusterArn": "arn:aws:ecs:eu-west-1:123456789012:cluster/shared"})
	if cluster != "shared" {
		t.Errorf("an existing cluster's name is %v", cluster)
	}

	pol := res.get("PollerScalingPolicy", "Properties")
	if pol.get("PolicyType").value() != "TargetTrackingScaling" || pol.get("ScalingTargetId").value() != "PollerScalableTarget" {
		t.Fatal("the scaling policy does not track a target on the poller's task count")
	}
	cfg := pol.get("TargetTrackingScalingPolicyConfiguration")
	if cfg.get("TargetValue").value() != "PollerBacklogPerTask" {
		t.Error("the target is not PollerBacklogPerTask")
	}
	metrics := map[string]node{}
	var returned []node
	for _, m := range cfg.get("CustomizedMetricSpecification", "Metrics").items() {
		metrics[m.get("Id").value()] = m
		if m.get("ReturnData").value() == "true" {
			returned = append(returned, m)
		}
	}
	if len(returned) != 1 {
		t.Fatalf("%d metrics returned, want the one expression", len(returned))
	}
	expr := regexp.MustCompile(`^\(?(\w+)(?: \+ (\w+))*\)? / (\w+)$`).FindStringSubmatch(returned[0].get("Expression").value())
	if expr == nil {
		t.Fatalf("the scaling metric %q is not messages over tasks", returned[0].get("Expression").value())
	}
	stat := func(id string) node { return metrics[id].get("MetricStat") }
	var queues []string
	for _, id := range regexp.MustCompile(`\w+`).FindAllString(strings.Split(expr[0], "/")[0], -1) {
		s := stat(id)
		if s.get("Metric", "Namespace").value() != "AWS/SQS" || s.get("Metric", "MetricName").value() != "ApproximateNumberOfMessagesVisible" || s.get("Stat").value() != "Sum" {
			t.Errorf("%s is not a queue's visible messages: %s", id, s.text())
		}
		queues = append(queues, refSet(s.get("Metric", "Dimensions"))...)
	}
	slices.Sort(queues)
	if !slices.Equal(queues, []string{"Queue", "QueueArn", "SecondDeleteQueue"}) {
		t.Errorf("the backlog counts the queues %v, want the two the poller consumes", queues)
	}
	tasks := stat(expr[3])
	dims := map[string]string{}
	for _, d := range tasks.get("Metric", "Dimensions").items() {
		dims[d.get("Name").value()] = strings.Join(refSet(d.get("Value")), ",")
	}
	if tasks.get("Metric", "Namespace").value() != "ECS/ContainerInsights" || tasks.get("Metric", "MetricName").value() != "RunningTaskCount" ||
		!maps.Equal(dims, map[string]string{"ClusterName": "EcsCluster,EcsClusterArn", "ServiceName": "PollerService"}) {
		t.Errorf("the backlog is divided by %s, want the service's running tasks", tasks.text())
	}
}

// TestTemplatePollerAlarms: alarms like the functions', on the poller's
// running tasks, its error lines and its queue's oldest message.
func TestTemplatePollerAlarms(t *testing.T) {
	tpl := loadTemplate(t)
	res := tpl.get("Resources")
	actions := res.get("FailureQueueAlarm", "Properties", "AlarmActions").text()
	for alarm, metric := range map[string]string{
		"PollerTasksAlarm":      "RunningTaskCount",
		"PollerErrorsAlarm":     `PollerErrors-${AWS::StackName}`,
		"PollerBacklogAgeAlarm": "ApproximateAgeOfOldestMessage",
	} {
		p := res.get(alarm, "Properties")
		if res.get(alarm, "Type").value() != "AWS::CloudWatch::Alarm" || p.get("MetricName").value() != metric {
			t.Errorf("%s: want an alarm on %s", alarm, metric)
		}
		if p.get("AlarmActions").text() != actions {
			t.Errorf("%s does not notify AlarmTopicArn as the other alarms do", alarm)
		}
	}
	tasks := res.get("PollerTasksAlarm", "Properties")
	if tasks.get("Threshold").value() != "PollerMinTasks" || tasks.get("ComparisonOperator").value() != "LessThanThreshold" || tasks.get("TreatMissingData").value() != "breaching" {
		t.Error("the tasks alarm must fire below PollerMinTasks, and when no task reports")
	}
	filter := res.get("PollerErrorLines", "Properties")
	mt := filter.get("MetricTransformations").items()
	if filter.get("LogGroupName").value() != "PollerLogGroup" || !strings.Contains(filter.get("FilterPattern").value(), `$.level = "ERROR"`) ||
		len(mt) != 1 || mt[0].get("MetricName").text() != res.get("PollerErrorsAlarm", "Properties", "MetricName").text() ||
		mt[0].get("MetricNamespace").value() != res.get("PollerErrorsAlarm", "Properties", "Namespace").value() {
		t.Error("the errors alarm does not count the poller's ERROR lines")
	}
	if !slices.Contains(refs(res.get("PollerBacklogAgeAlarm", "Properties", "Dimensions")), "Queue") {
		t.Error("the backlog age alarm is not on the poller's queue")
	}
}

// TestTemplateLintsWithThePollerOn runs cfn-lint on copies of the template
// whose defaults turn the poller on: cfn-lint takes no parameters, and
// checks some properties only with the values their defaults give. Each
// copy also moves one other choice the poller's resources depend on.
func TestTemplateLintsWithThePollerOn(t *testing.T) {
	needCfnLint(t)
	on := map[string]string{"CreatePoller": "true", "PollerImageUri": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/invalidator-poller:v1"}
	for name, defaults := range map[string]map[string]string{
		"created cluster and endpoints": {},
		"existing cluster, S3 gateway":  {"EcsClusterArn": "arn:aws:ecs:eu-west-1:123456789012:cluster/shared", "CreatePollerEndpoints": "false", "PollerRouteTableIds": "rtb-0123456789abcdef0"},
		"existing cache and queue, password": {"CreateCache": "false", "CacheAuthentication": "password", "CacheEndpoint": "cache.example:6379",
			"CachePasswordSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:invalidator-AbCdEf", "CreateQueue": "false", "QueueArn": "arn:aws:sqs:eu-west-1:123456789012:changes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			maps.Copy(defaults, on)
			lintWithDefaults(t, defaults)
		})
	}
}

func needCfnLint(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cfn-lint"); err != nil {
		if testenv.InCI() {
			t.Fatal("cfn-lint is not installed")
		}
		t.Skip("cfn-lint is not installed (pip install cfn-lint)")
	}
}

// lintWithDefaults runs cfn-lint on template.yaml with the given
// parameters' defaults: cfn-lint takes no parameters.
func lintWithDefaults(t *testing.T, defaults map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(withDefaults(t, defaults)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cfn-lint", path).CombinedOutput(); err != nil {
		t.Errorf("cfn-lint with %v: %v\n%s", defaults, err, out)
	}
}

// withDefaults is template.yaml with the given parameters' defaults.
func withDefaults(t *testing.T, defaults map[string]string) string {
	t.Helper()
	data, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	tpl := loadTemplate(t)
	for param, value := range defaults {
		d := tpl.get("Parameters", param, "Default")
		if !d.ok() {
			t.Fatalf("parameter %s has no default to change", param)
		}
		line := lines[d.Line-1]
		lines[d.Line-1] = line[:d.Column-1] + strconv.Quote(value)
	}
	return strings.Join(lines, "\n")
}

// TestTemplatePollerReplacesTheSQSFunction: with the poller, the SQS
// function's event sources are off, so that the poller's scaling sees the
// whole backlog of the queues it consumes.
func TestTemplatePollerReplacesTheSQSFunction(t *testing.T) {
	tpl := loadTemplate(t)
	events := tpl.get("Resources", "SqsInvalidateFunction", "Properties", "Events")
	n := 0
	for _, ev := range events.values() {
		if ev.get("Type").value() != "SQS" {
			continue
		}
		n++
		if got := ev.get("Properties", "Enabled").text(); !strings.HasPrefix(got, "!If [CreatePoller, false, true]") {
			t.Errorf("an SQS event of the function is Enabled %q, want off with the poller", got)
		}
	}
	if n != 2 {
		t.Fatalf("%d SQS events, want the queue's and the delay queue's", n)
	}
}
