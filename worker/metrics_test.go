package worker

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/invalidator-go/invalidator/invalidate"
)

// published are the metrics AWS publishes that the template's dashboard
// and alarms name, by namespace: the services' metric pages.
var published = map[string][]string{
	"AWS/SQS":               {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"},
	"AWS/Lambda":            {"Errors", "IteratorAge"},
	"AWS/ElastiCache":       {"ElastiCacheProcessingUnits", "ThrottledCmds"},
	"ECS/ContainerInsights": {"RunningTaskCount"},
}

// emitted are the metrics the worker writes in its EMF lines, every
// branch on.
func emitted() []string {
	var names []string
	figs := figures(invalidate.Metrics{TagsInvalidated: 1, Throttled: 1, FleetDown: true}, 1, scheduled{keys: 1, tags: 1}, announcements{}, true)
	figs = append(figs, stages{}.figures(true)...)
	figs = append(figs, again{cause: causeDelayed, keys: 1}.figures()...)
	for _, f := range figs {
		if f.metric != "" {
			names = append(names, f.metric)
		}
	}
	return names
}

// TestEveryMetricTheTemplateNamesExists: the dashboard's and the alarms'
// metrics are ones the worker emits (namespace Invalidator), a metric
// filter of the template makes, or AWS publishes: a metric renamed in the
// code, or misspelt in the template, is a graph or an alarm of nothing.
func TestEveryMetricTheTemplateNamesExists(t *testing.T) {
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Type       string    `yaml:"Type"`
			Properties yaml.Node `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	ours := emitted()
	var filtered []string // metric filters' metrics, whatever their namespace
	for _, r := range tpl.Resources {
		if r.Type == "AWS::Logs::MetricFilter" {
			var p struct {
				Transformations []struct {
					MetricName yaml.Node `yaml:"MetricName"`
				} `yaml:"MetricTransformations"`
			}
			if err := r.Properties.Decode(&p); err != nil {
				t.Fatal(err)
			}
			for _, m := range p.Transformations {
				filtered = append(filtered, m.MetricName.Value)
			}
		}
	}
	check := func(where, namespace, metric string) {
		switch {
		case namespace == "Invalidator" && (slices.Contains(ours, metric) || slices.Contains(filtered, metric)):
		case slices.Contains(published[namespace], metric):
		default:
			t.Errorf("%s names %s %s: no EMF line of the worker, metric filter or AWS service publishes it", where, namespace, metric)
		}
	}
	dashboards, searched := 0, 0
	for name, r := range tpl.Resources {
		switch r.Type {
		case "AWS::CloudWatch::Alarm":
			var p struct {
				Namespace  string    `yaml:"Namespace"`
				MetricName yaml.Node `yaml:"MetricName"`
			}
			if err := r.Properties.Decode(&p); err != nil {
				t.Fatal(err)
			}
			check(name, p.Namespace, p.MetricName.Value)
		case "AWS::CloudWatch::Dashboard":
			dashboards++
			var p struct {
				Body yaml.Node `yaml:"DashboardBody"`
			}
			if err := r.Properties.Decode(&p); err != nil {
				t.Fatal(err)
			}
			// The !Sub variables as numbers: inside strings or out, the body
			// is then JSON.
			body := regexp.MustCompile(`\$\{[^}]*\}`).ReplaceAllString(p.Body.Value, "1")
			var d struct {
				Widgets []struct {
					Properties struct {
						Title   string  `json:"title"`
						Metrics [][]any `json:"metrics"`
					} `json:"properties"`
				} `json:"widgets"`
			}
			if err := json.Unmarshal([]byte(body), &d); err != nil {
				t.Fatalf("%s: its body is no JSON: %v", name, err)
			}
			for _, w := range d.Widgets {
				for _, row := range w.Properties.Metrics {
					if e, ok := row[0].(map[string]any); ok {
						expr, _ := e["expression"].(string)
						for _, m := range regexp.MustCompile(`\{Invalidator,[^}]*\} MetricName="(\w+)"`).FindAllStringSubmatch(expr, -1) {
							searched++
							check(name+" ("+w.Properties.Title+")", "Invalidator", m[1])
						}
						continue
					}
					namespace, _ := row[0].(string)
					metric, _ := row[1].(string)
					check(name+" ("+w.Properties.Title+")", namespace, metric)
				}
			}
		}
	}
	if dashboards != 1 || searched < 8 {
		t.Fatalf("%d dashboards, %d of the worker's metrics searched: want the dashboard, showing lag, records, deletes again, ECPUs", dashboards, searched)
	}
}
