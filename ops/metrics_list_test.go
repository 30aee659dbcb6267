// Package ops holds regressd's deployment files; its tests check that they
// agree with each other and with the metrics the binary serves.
package ops

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// listed reads the metric names of METRICS.md's table.
func listed(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(regressd_[a-z_]+)` \\| (\\w+)").FindAllStringSubmatch(string(raw), -1) {
		out = append(out, m[1])
	}
	if len(out) < 30 {
		t.Fatalf("METRICS.md lists %d metrics; the table was not read", len(out))
	}
	return out
}

// used returns the regressd_* metric names in files, with a histogram's
// _bucket, _sum and _count series named by the histogram.
func used(t *testing.T, known []string, files ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	re := regexp.MustCompile(`\bregressd_[a-z_]+`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range re.FindAllString(string(raw), -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(known, base) {
					n = base
				}
			}
			if !slices.Contains(out[n], f) {
				out[n] = append(out[n], f)
			}
		}
	}
	return out
}

// Every metric the alerts, their tests, the dashboard and the manifests
// name is one the binary serves (METRICS.md, itself checked against the
// metrics package by metrics.TestMetricsMatchOpsList), and the dashboard
// shows every one.
func TestOpsUseListedMetrics(t *testing.T) {
	known := listed(t)
	k8s, _ := filepath.Glob("k8s/*.yaml")
	files := append([]string{"prometheus/alerts.yml", "prometheus/alerts_test.yml", "grafana/regressd.json"}, k8s...)
	for name, where := range used(t, known, files...) {
		if !slices.Contains(known, name) {
			t.Errorf("%s, named in %v, is not a metric of METRICS.md", name, where)
		}
	}
	shown := used(t, known, "grafana/regressd.json")
	for _, name := range known {
		if _, ok := shown[name]; !ok {
			t.Errorf("%s is not on the dashboard", name)
		}
	}
}

// Every alert has a runbook section, a runbook link to it, and a unit test.
func TestAlertsHaveRunbookAndTests(t *testing.T) {
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, _ := os.ReadFile("prometheus/alerts_test.yml")
	runbook, _ := os.ReadFile("RUNBOOK.md")
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 7 {
		t.Fatalf("%d alerts found", len(alerts))
	}
	for _, a := range alerts {
		name := a[1]
		if !regexp.MustCompile(`(?m)^## ` + name + `$`).Match(runbook) {
			t.Errorf("RUNBOOK.md has no section \"## %s\"", name)
		}
		if !strings.Contains(string(rules), `runbook: "ops/RUNBOOK.md#`+strings.ToLower(name)+`"`) {
			t.Errorf("%s does not link its runbook section", name)
		}
		if !regexp.MustCompile(`(?m)alertname: ` + name + `$`).Match(tests) {
			t.Errorf("%s has no test in alerts_test.yml", name)
		}
	}
}
