package pipeline

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/regressd/regressd/"

// imports reads the regressd packages each folder's non-test files import,
// by folder relative to the module root.
func imports(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		if out[dir] == nil {
			out[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, module) {
				out[dir][strings.TrimPrefix(p, module)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The rules docs/ARCHITECTURE.md states: contracts import nothing of ours,
// the engine knows no SQL, bus or HTTP, storage knows no model, the roles
// meet only on the bus, and only commands reach the pipeline.
func TestImportRules(t *testing.T) {
	roles := []string{"scheduler", "producer", "worker", "writer"}
	all := imports(t)
	if len(all) < 15 || !all["pipeline"]["writer"] {
		t.Fatalf("read the imports of %d folders, pipeline's %v: not the module", len(all), all["pipeline"])
	}
	for dir, deps := range all {
		top, _, _ := strings.Cut(dir, "/")
		for dep := range deps {
			depTop, _, _ := strings.Cut(dep, "/")
			var broken string
			switch {
			case top == "schemas":
				broken = "contracts import nothing of ours"
			case top == "gpu" && depTop != "gpu":
				broken = "the engine knows no SQL, bus or HTTP"
			case top == "tsdb" && depTop != "tsdb" && depTop != "schemas":
				broken = "storage knows no model and no bus"
			case slices.Contains(roles, top) && slices.Contains(roles, depTop) && top != depTop:
				broken = "roles meet only on the bus"
			case (depTop == "pipeline" || depTop == "bench" || depTop == "cmd") && top != "cmd" && top != "bench" && top != "pipeline":
				broken = "only commands reach the pipeline"
			}
			if broken != "" {
				t.Errorf("%s imports %s: %s", dir, dep, broken)
			}
		}
	}
}
