package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// noBudget is a budget with no caps.
type noBudget struct{}

func (noBudget) take(string, int64, int, int64) error { return nil }

// decodeX decodes a body whose X_train is raw (the rest valid and short).
func decodeX(raw string) (*predictRequest, error) {
	return decodeBody(strings.NewReader(`{"X_train": `+raw+`, "y_train": [1], "X_test": [[1]]}`), noBudget{})
}

func TestParseMatrix(t *testing.T) {
	tests := []struct {
		raw     string
		want    string // fmt of the matrix, NaN for null
		nonNull int64
		err     string
	}{
		{raw: `[[1]]`, want: "[[1]]", nonNull: 1},
		{raw: " [ [ -2.5e3 ] ]", want: "[[-2500]]", nonNull: 1},
		{raw: `[[null]]`, want: "[[NaN]]", nonNull: 0},
		{raw: `[]`, err: "X_train is empty"},
		{raw: `[[]]`, err: "X_train row 0 is empty"},
		{raw: `[[1],[1,2]]`, err: "X_train row 1 has 2 values but row 0 has 1"},
		{raw: `[[1,2],[1]]`, err: "X_train row 1 has 1 values but row 0 has 2"},
		{raw: `[[1],2]`, err: "X_train row 1 must be an array of numbers, got a number"},
		{raw: `[[1],[[2]]]`, err: "X_train row 1, column 0: want a number or null, got an array"},
		{raw: `[[1],[{"a":[1,2]}]]`, err: "got an object"},
		{raw: `[[true]]`, err: "got a boolean"},
		{raw: `[["1"]]`, err: "got a string"},
		{raw: `[[-1e400]]`, err: "-1e400 is not a finite number"},
		{raw: `{"a":1}`, err: "X_train must be an array of rows, got an object"},
		{raw: `"rows"`, err: "got a string"},
		{raw: `null`, err: "X_train is required"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			r, err := decodeX(tt.raw)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err=%v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(r.X); got != tt.want || r.NonNull != tt.nonNull+2 {
				t.Fatalf("got %s (%d non-null), want %s (%d)", got, r.NonNull-2, tt.want, tt.nonNull)
			}
		})
	}
}

func TestParseVector(t *testing.T) {
	dec := func(y string) (*predictRequest, error) {
		return decodeBody(strings.NewReader(`{"X_train": [[1],[2],[3]], "y_train": `+y+`, "X_test": [[1]]}`), noBudget{})
	}
	r, err := dec(`[1, 2.5, -3]`)
	if err != nil || fmt.Sprint(r.Y) != "[1 2.5 -3]" {
		t.Fatalf("%v %v", r, err)
	}
	if _, err := dec(`[1, null, 2]`); err == nil || !strings.Contains(err.Error(), "y_train[1] is null") {
		t.Fatalf("null target: %v", err)
	}
	if _, err := dec(`[[1], 2, 3]`); err == nil || !strings.Contains(err.Error(), "y_train[0]: want a number or null, got an array") {
		t.Fatalf("nested: %v", err)
	}
}

// TestDecodeBodyRefuses: duplicate keys (top level and nested), unknown
// fields by name, trailing data and oversize small fields.
func TestDecodeBodyRefuses(t *testing.T) {
	const data = `"X_train": [[1]], "y_train": [1], "X_test": [[1]]`
	tests := []struct{ body, want string }{
		{`{` + data + `, "model": "a", "model": "b"}`, `field(s) "model" appear more than once`},
		{`{` + data + `, "X_test": [[2]]}`, `field(s) "X_test" appear more than once`},
		{`{` + data + `, "memory_policy": {"cache": true, "cache": false}}`, `memory_policy has the key "cache" more than once`},
		{`{` + data + `, "memory_policy": {"a": {"b": 1, "b": 2}}}`, `has the key "b" more than once`},
		{`{` + data + `, "speed": 1, "Model": "x"}`, `unknown field(s) "Model" (did you mean "model"?), "speed"`},
		{`{` + data + `} {}`, "more after its JSON object"},
		{`{` + data + `, "model": "` + strings.Repeat("m", maxSmallField) + `"}`, "model is over the 65536 bytes this field may take"},
		{`{` + data + `, "quantiles": "0.5"}`, "quantiles must be an array of numbers"},
		{`{"X_train": [[NaN]]}`, "NaN"},
		{`{"X_train": [[1]], "y_train": [Infinity]}`, "Infinity"},
		{`{` + data, "ends before the object does"},
		{`xyz`, "the body is not valid JSON"},
		{` nul`, "the body is not valid JSON"},
		{`null`, "must be a JSON object with model, X_train, y_train and X_test, got null"},
		{`[1]`, "must be a JSON object with model, X_train, y_train and X_test, got an array"},
		{`{` + data + `, "quantiles": [0.1, "0.5"]}`, `quantiles must be an array of numbers in (0, 1): element 1 is a string ("0.5")`},
		{`{` + data + ", \"model\": \"synthefy/nori\xff\"}", "not valid UTF-8"},
		{`{` + data + ", \"mod\xe9l\": \"x\"}", "not valid UTF-8"},
	}
	for _, tt := range tests {
		_, err := decodeBody(strings.NewReader(tt.body), noBudget{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.80s: err=%v, want %q", tt.body, err, tt.want)
		}
	}
	// Keys that repeat across objects, not within one, are fine.
	r, err := decodeBody(strings.NewReader(`{`+data+`, "memory_policy": {"cache": true}, "large_context_policy": ["random", "cluster_route"], "quantiles": [0.9, 0.1]}`), noBudget{})
	if err != nil || fmt.Sprint(r.Quantiles) != "[0.9 0.1]" || string(r.LargePolicy) != `["random", "cluster_route"]` {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestEncodeRequestRoundTrip(t *testing.T) {
	X := [][]float64{{1, math.NaN()}, {math.Inf(1), 1e-300}}
	b := encodeRequest(`we"ird`, X, []float64{1, 2}, [][]float64{{0.1, 2}}, json.RawMessage(` "exact" `))
	r, err := decodeBody(strings.NewReader(string(b)), noBudget{})
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !math.IsNaN(r.X[0][1]) || !math.IsNaN(r.X[1][0]) || r.X[1][1] != 1e-300 || r.NonNull != 2+2+2 {
		t.Fatalf("round trip: %v (non-null %d)", r.X, r.NonNull)
	}
	if r.Model != `we"ird` || string(r.Policy) != `"exact"` {
		t.Fatalf("model %q policy %s", r.Model, r.Policy)
	}
}

// BenchmarkDecodeBody decodes a body of about 24 MB (300,000 context rows
// of 8 features) as the server does, reporting its allocations.
//
//	go test ./gateway -run '^$' -bench DecodeBody -benchtime 3x -benchmem
func BenchmarkDecodeBody(b *testing.B) {
	c := officialCall{model: "nori-6m"}
	for i := range 300_000 {
		row := make([]float64, 8)
		for j := range row {
			row[j] = float64((i*7+j*13)%1000) / 7
		}
		c.X = append(c.X, row)
		c.y = append(c.y, float64(i%100)/3)
	}
	c.Xq = c.X[:1000]
	body := c.body()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBody(bytes.NewReader(body), noBudget{}); err != nil {
			b.Fatal(err)
		}
	}
}
