package eval

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadAndRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.csv", "time,x,y\n2020-01-01,1,2\n2020-01-02,,4\n2020-01-03,3,6\n2020-01-04,4,8\n")
	write(t, dir, "splits/a.csv", "seed0,seed1\n1,0\n1,0\n0,1\n0,1\n")
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0]
	if d.Name != "a" || d.Target != "y" || len(d.Features) != 1 || d.Features[0] != "x" {
		t.Fatalf("dataset %+v: want features [x] (time skipped), target y", d)
	}
	if !math.IsNaN(d.X[1][0]) {
		t.Errorf("empty cell = %v, want NaN", d.X[1][0])
	}
	var calls int
	res, err := Run(context.Background(), ds, func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error) {
		calls++
		if len(X) != 2 || len(Xq) != 2 {
			t.Errorf("context %d rows, queries %d: want 2 and 2", len(X), len(Xq))
		}
		return make([]float64, len(Xq)), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(res.Datasets) != 1 || len(res.Datasets[0].SplitR2) != 2 {
		t.Errorf("calls %d result %+v", calls, res)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no csv", map[string]string{"x.txt": "a"}, "no *.csv"},
		{"target as a feature", map[string]string{"a.csv": "x,y\n1,1\n2,2\n", "manifest.json": `[{"file": "a.csv", "features": ["x", "y"], "target": "y"}]`, "splits/a.csv": "seed0\n1\n0\n"},
			`target "y" is also listed as a feature`},
		{"one test row", map[string]string{"a.csv": "x,y\n1,1\n2,2\n3,3\n", "splits/a.csv": "seed0\n1\n0\n0\n"}, "R² is undefined"},
		{"text target", map[string]string{"a.csv": "x,y\n1,foo\n", "splits/a.csv": "seed0\n1\n"}, `target "foo" is not a number`},
		{"text of many values", map[string]string{"a.csv": "x,y\n" + manyLevels(maxLevels+1), "splits/a.csv": "seed0\n" + strings.Repeat("1\n", maxLevels+1)},
			"text with 65 distinct values"},
		{"split rows", map[string]string{"a.csv": "x,y\n1,1\n2,2\n", "splits/a.csv": "seed0\n1\n"}, "has 1 rows, the data has 2"},
		{"split value", map[string]string{"a.csv": "x,y\n1,1\n2,2\n", "splits/a.csv": "seed0\n1\n7\n"}, "not 0 or 1"},
		{"all test", map[string]string{"a.csv": "x,y\n1,1\n2,2\n", "splits/a.csv": "seed0\n1\n1\n"}, "no train or no test"},
		{"no split", map[string]string{"a.csv": "x,y\n1,1\n"}, "split file"},
		{"empty target", map[string]string{"a.csv": "x,y\n1,\n", "splits/a.csv": "seed0\n1\n"}, "target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range tc.files {
				write(t, dir, n, b)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestScores(t *testing.T) {
	truth := []float64{1, 2, 3, 4}
	if r2 := R2(truth, truth); r2 != 1 {
		t.Errorf("perfect R² = %g", r2)
	}
	if r2 := R2(truth, []float64{2.5, 2.5, 2.5, 2.5}); r2 != 0 {
		t.Errorf("mean R² = %g, want 0", r2)
	}
	if e := RMSE(truth, []float64{2, 3, 4, 5}); e != 1 {
		t.Errorf("RMSE = %g, want 1", e)
	}
}

func manyLevels(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "v%d,%d\n", i, i)
	}
	return b.String()
}

// A text feature column is one-hot encoded over its sorted values; a
// missing text cell is missing in each of its indicators.
func TestTextFeatureOneHot(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.csv", "city,x,y\nParis,1,2\nNew York,2,4\nNA,3,6\nParis,4,8\n")
	write(t, dir, "splits/a.csv", "seed0\n1\n1\n0\n0\n")
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0]
	if got := strings.Join(d.Features, "|"); got != "city=New York|city=Paris|x" {
		t.Fatalf("features %s", got)
	}
	if d.X[0][0] != 0 || d.X[0][1] != 1 || d.X[1][0] != 1 || !math.IsNaN(d.X[2][0]) || !math.IsNaN(d.X[2][1]) || d.X[3][2] != 4 {
		t.Fatalf("rows %v", d.X)
	}
}

// A stray text cell in a numeric column is missing, with a note; a UTF-8
// byte order mark before a quoted header is not part of the first name.
func TestStrayTextAndBOM(t *testing.T) {
	dir := t.TempDir()
	var csv, split strings.Builder
	csv.WriteString("\ufeff\"x\",\"y\"\n")
	split.WriteString("seed0\n")
	for i := range 20 { // one stray cell in twenty: missing, not a category
		x := strconv.Itoa(i)
		if i == 1 {
			x = "seven"
		}
		fmt.Fprintf(&csv, "%s,%d\n", x, 2*i)
		fmt.Fprintf(&split, "%d\n", i%2)
	}
	write(t, dir, "a.csv", csv.String())
	write(t, dir, "splits/a.csv", split.String())
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0]
	if len(d.Features) != 1 || d.Features[0] != "x" || !math.IsNaN(d.X[1][0]) || d.X[2][0] != 2 {
		t.Fatalf("features %q rows %v", d.Features, d.X)
	}
	if len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "1 cell(s) that are not numbers") {
		t.Fatalf("notes %q", d.Notes)
	}
}

// A column of codes where text is more than a stray cell is a text column.
func TestMixedCodesAreText(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.csv", "code,x,y\n12,1,2\nA7,2,4\n12,3,6\nB2,4,8\n")
	write(t, dir, "splits/a.csv", "seed0\n1\n1\n0\n0\n")
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ds[0].Features, "|"); got != "code=12|code=A7|code=B2|x" {
		t.Fatalf("features %s", got)
	}
}

// A row with no target value is left out, with a note, and its line of
// the split file with it; it used to stop the whole eval.
func TestRowsWithoutTargetLeftOut(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.csv", "x,y\n1,2\n2,NA\n3,6\n4,\n5,10\n6,12\n")
	write(t, dir, "splits/a.csv", "seed0\n1\n1\n1\n0\n0\n0\n")
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0]
	if len(d.Y) != 4 || d.Y[1] != 6 || len(d.Test[0]) != 4 || !d.Test[0][0] || !d.Test[0][1] || d.Test[0][2] {
		t.Fatalf("y %v test %v, want rows 1, 3, 5, 6 with tests 1 and 3", d.Y, d.Test)
	}
	if len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "2 row(s) with no target value left out") {
		t.Errorf("notes %q", d.Notes)
	}
}
