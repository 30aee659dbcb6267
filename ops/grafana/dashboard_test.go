// Package grafana holds regressd's Grafana dashboard; its test checks the
// dashboard's layout and that every query is valid PromQL.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct{ Name, Type, Query string } `json:"list"`
	} `json:"templating"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("regressd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("regressd.json: %v", err)
	}
	return d
}

// all flattens rows' nested panels.
func all(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, all(p.Panels)...)
	}
	return out
}

func TestDashboardLayout(t *testing.T) {
	d := load(t)
	if d.UID == "" || d.Title == "" {
		t.Fatal("dashboard has no uid or title")
	}
	if len(d.Templating.List) != 1 || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Fatalf("templating %+v, want one Prometheus datasource variable", d.Templating.List)
	}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	queries := 0
	for _, p := range all(d.Panels) {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q at %+v is off the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at (%d,%d)", other, p.Title, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q query %s is empty", p.Title, q.RefID)
			}
			queries++
		}
	}
	if queries < 20 {
		t.Errorf("%d queries; want the whole pipeline covered", queries)
	}
}

// Every query parses as PromQL: promtool checks them as recording rules,
// with Grafana's interval variables replaced by durations.
func TestDashboardQueriesArePromQL(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	d := load(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range all(d.Panels) {
		for _, q := range p.Targets {
			expr := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h").Replace(q.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: unknown variable in %q", p.Title, q.Expr)
			}
			n++
			quoted, _ := json.Marshal(expr)
			fmt.Fprintf(&b, "      - record: dashboard:q%d\n        expr: %s\n", n, quoted)
		}
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("SUCCESS: %d rules found", n)) {
		t.Fatalf("promtool checked something else than %d queries:\n%s", n, out)
	}
}

// need finds cmd, installing the distribution's pkg through
// ops/ensure-package.sh when it is missing.
func need(t *testing.T, cmd, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(cmd); err == nil {
		return p
	}
	if out, err := exec.Command("bash", "../ensure-package.sh", cmd, pkg).CombinedOutput(); err != nil {
		t.Fatalf("install %s for %s: %v\n%s", pkg, cmd, err, out)
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		t.Fatalf("%s still missing after installing %s", cmd, pkg)
	}
	return p
}
