package producer

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// buildWindow makes a window record: time, host tag, target y, features a, b.
// nan marks an empty cell.
func buildWindow(t *testing.T, hosts []string, y, a, b []float64) window {
	t.Helper()
	q := tsdb.WindowQuery{Target: "y", Features: []string{"a", "b"}, TagColumns: []string{"host"}}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, tsdb.WindowSchema(q))
	t.Cleanup(rb.Release)
	for i := range y {
		rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC).UnixMicro()))
		rb.Field(1).(*array.StringBuilder).Append(hosts[i])
		for j, col := range [][]float64{y, a, b} {
			fb := rb.Field(2 + j).(*array.Float64Builder)
			if math.IsNaN(col[i]) {
				fb.AppendNull()
			} else {
				fb.Append(col[i])
			}
		}
	}
	rec := rb.NewRecordBatch()
	t.Cleanup(rec.Release)
	return newWindow(rec, 1, 2)
}

func TestSplitExamplesAndQueries(t *testing.T) {
	nan := math.NaN()
	w := buildWindow(t, []string{"h", "h", "h", "h", "h"},
		[]float64{1, nan, nan, 4, nan},
		[]float64{1, 2, nan, 4, 5},
		[]float64{1, 2, 3, nan, 5})
	ex, q := w.split()
	if got, want := ex, []int{0}; !equal(got, want) {
		t.Errorf("examples=%v, want %v (row 3 lacks a feature)", got, want)
	}
	if got, want := q, []int{1, 4}; !equal(got, want) {
		t.Errorf("queries=%v, want %v (row 2 lacks a feature)", got, want)
	}
	if got := newest([]int{1, 2, 3, 4}, 2); !equal(got, []int{3, 4}) {
		t.Errorf("newest=%v", got)
	}
}

func TestSeries(t *testing.T) {
	one := buildWindow(t, []string{"a", "a"}, []float64{1, 2}, []float64{1, 2}, []float64{1, 2})
	s, err := one.series([]string{"host"})
	if err != nil || s["host"] != "a" {
		t.Fatalf("series=%v err=%v", s, err)
	}
	many := buildWindow(t, []string{"a", "b", "c", "d"}, []float64{1, 2, 3, 4}, []float64{1, 2, 3, 4}, []float64{1, 2, 3, 4})
	_, err = many.series([]string{"host"})
	if err == nil {
		t.Fatal("no error for 4 series")
	}
	for _, want := range []string{"4 series", "host=a", "host=b", "host=c", "tags=host:a"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "host=d") {
		t.Errorf("error names more than three series: %q", err)
	}
	// The suggestion can be pasted back as it is, spaces and all.
	spaced := buildWindow(t, []string{"New York", "Boston"}, []float64{1, 2}, []float64{1, 2}, []float64{1, 2})
	if _, err := spaced.series([]string{"host"}); err == nil || !strings.Contains(err.Error(), "tags=host:New%20York") {
		t.Errorf("suggestion for a value with a space: %v", err)
	}
}

// The single-series rule counts only the rows a run would use, and a tag
// with no value (empty here) is no series of its own.
func TestSeriesCountsUsableRowsOnly(t *testing.T) {
	nan := math.NaN()
	w := buildWindow(t, []string{"a", "b", "a", ""},
		[]float64{1, 2, nan, 4},
		[]float64{1, nan, 3, 4}, // row 1 (host b) lacks a feature: neither example nor query
		[]float64{1, 2, 3, 4})
	s, err := w.series([]string{"host"})
	if err == nil {
		t.Fatalf("series=%v: rows a and \"\" are two series for the plugin (a tag value against none)", s)
	}
	if strings.Contains(err.Error(), "host=b") || !strings.Contains(err.Error(), "2 series") {
		t.Errorf("error %q: want the two usable series, not host=b", err)
	}
	// The first series has no value: the hint selects it with an empty one.
	w = buildWindow(t, []string{"", "a"}, []float64{1, 2}, []float64{1, 2}, []float64{1, 2})
	if _, err := w.series([]string{"host"}); err == nil || !strings.HasSuffix(err.Error(), "e.g. tags=host:") {
		t.Errorf("hint for a series with no tag value: %v", err)
	}
	w = buildWindow(t, []string{"a", "b", "a"}, []float64{1, 2, nan}, []float64{1, nan, 3}, []float64{1, 2, 3})
	if s, err := w.series([]string{"host"}); err != nil || s["host"] != "a" {
		t.Errorf("series=%v err=%v, want host=a: the host=b row is not usable", s, err)
	}
}

func TestQueryRecordsPlanAndContext(t *testing.T) {
	n := 25
	y, a, b, hosts := make([]float64, n), make([]float64, n), make([]float64, n), make([]string, n)
	for i := range y {
		y[i], a[i], b[i], hosts[i] = float64(i), float64(2*i), float64(3*i), "h"
	}
	w := buildWindow(t, hosts, y, a, b)
	rows := []int{0, 3, 5, 7, 9, 11, 13}
	var sizes []int64
	for i, part := range cut(rows, 3) {
		rec := w.queryRecord([]string{"a", "b"}, part)
		if !rec.Schema().Equal(schemas.QuerySchema([]string{"a", "b"})) {
			t.Fatalf("schema %s", rec.Schema())
		}
		sizes = append(sizes, rec.NumRows())
		if i == 1 && rec.Column(1).(*array.Float64).Value(0) != 14 {
			t.Fatalf("batch 1 starts at a=%v, want 14 (row 7)", rec.Column(1).(*array.Float64).Value(0))
		}
		rec.Release()
	}
	if len(sizes) != 3 || sizes[0] != 3 || sizes[2] != 1 {
		t.Fatalf("batches %v, want 3,3,1", sizes)
	}
	// The stored plan is every batch's timestamps.
	plan, err := decodePlan(encodePlan(w, cut(rows, 3)))
	if err != nil || len(plan) != 3 || len(plan[2]) != 1 || plan[1][0] != int64(w.times.Value(7)) {
		t.Fatalf("plan %v, %v", plan, err)
	}
	if _, err := decodePlan(encodePlan(w, cut(rows, 3))[:5]); err == nil {
		t.Fatal("a cut plan decoded")
	}
	ctx := w.contextRecord([]string{"a", "b"}, []int{2, 4})
	defer ctx.Release()
	if ctx.NumRows() != 2 || ctx.Column(2).(*array.Float64).Value(1) != 4 || ctx.Column(1).(*array.Float64).Value(0) != 6 {
		t.Fatalf("context %v", ctx)
	}
}

func TestCheckSchema(t *testing.T) {
	table := tsdb.Table{Name: "m", Columns: []tsdb.Column{
		{Name: "time", Kind: tsdb.KindTime, DataType: "timestamp with time zone"},
		{Name: "host", Kind: tsdb.KindTag, DataType: "text"},
		{Name: "y", Kind: tsdb.KindField, DataType: "double precision"},
		{Name: "a", Kind: tsdb.KindField, DataType: "integer"},
		{Name: "flag", Kind: tsdb.KindOther, DataType: "boolean"},
	}}
	ok := schemas.RunArgs{Measurement: "m", Field: "y", FeatureFields: []string{"a"}, Tags: map[string]string{"host": "x"}}
	if err := CheckSchema(table, ok); err != nil {
		t.Fatal(err)
	}
	bad := schemas.RunArgs{Measurement: "m", Field: "host", FeatureFields: []string{"flag", "nope"}, Tags: map[string]string{"y": "1", "zone": "z"}}
	err := CheckSchema(table, bad)
	for _, want := range []string{`field "host" is of type text`, `feature "flag" is of type boolean`, `feature "nope" is not a column`, `tag "y" in tags is a double precision column`, `tag "zone" in tags is not a column`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	table.Columns = append(table.Columns, tsdb.Column{Name: "model", Kind: tsdb.KindTag, DataType: "text"})
	if err := CheckSchema(table, ok); err == nil || !strings.Contains(err.Error(), `"model" collides with the provenance columns of m_regressed`) {
		t.Errorf("reserved tag: %v", err)
	}
	// Every collision at once, naming the table the run writes.
	table.Columns = append(table.Columns, tsdb.Column{Name: "p10", Kind: tsdb.KindTag, DataType: "text"})
	out := ok
	out.OutputMeasurement, out.Quantiles = "elsewhere", []float64{0.1}
	err = CheckSchema(table, out)
	for _, want := range []string{`"model" collides with the provenance columns of elsewhere`, `level 0.1 writes the column "p10"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Too little history says why when rows with a target miss a feature:
// how many, and which features.
func TestSkipNamesMissingFeatures(t *testing.T) {
	nan := math.NaN()
	w := buildWindow(t, []string{"h", "h", "h", "h"},
		[]float64{1, 2, 3, nan},
		[]float64{1, 2, 3, 4},
		[]float64{nan, nan, nan, nan}) // feature b is empty everywhere
	ex, q := w.split()
	v := skipVerdict(len(ex), 2, len(q), 0, w.lacking([]string{"a", "b"}))
	if v == nil || !strings.Contains(v.msg, `3 rows with a target value lack feature "b"`) || strings.Contains(v.msg, `"a"`) {
		t.Fatalf("verdict %+v, want it to name the 3 rows lacking feature b", v)
	}
	w = buildWindow(t, []string{"h", "h"}, []float64{1, 2}, []float64{nan, 1}, []float64{1, nan})
	if got := w.lacking([]string{"a", "b"}); !strings.Contains(got, `2 rows with a target value lack features "a", "b"`) {
		t.Errorf("lacking = %q", got)
	}
	w = buildWindow(t, []string{"h"}, []float64{1}, []float64{1}, []float64{1})
	if got := w.lacking([]string{"a", "b"}); got != "" {
		t.Errorf("lacking = %q, want nothing when every row has its features", got)
	}
}
