package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseMatrix(t *testing.T) {
	tests := []struct {
		raw     string
		want    string // fmt of the matrix, NaN for null
		nonNull int64
		err     string
	}{
		{raw: `[[1,2],[3,4]]`, want: "[[1 2] [3 4]]", nonNull: 4},
		{raw: " [ [ 1 , -2.5e3 ] ,\n [ null , 0 ] ] ", want: "[[1 -2500] [NaN 0]]", nonNull: 3},
		{raw: `[[null]]`, want: "[[NaN]]", nonNull: 0},
		{raw: `[]`, err: "X is empty"},
		{raw: `[[]]`, err: "X row 0 is empty"},
		{raw: `[[1],[1,2]]`, err: "X row 1 has 2 values but row 0 has 1"},
		{raw: `[[1,2],[1]]`, err: "X row 1 has 1 values but row 0 has 2"},
		{raw: `[[1],2]`, err: "X row 1 must be an array of numbers, got a number"},
		{raw: `[[1],[[2]]]`, err: "X row 1, column 0: want a number or null, got an array"},
		{raw: `[[1],[{"a":[1,2]}]]`, err: "got an object"},
		{raw: `[[true]]`, err: "got a boolean"},
		{raw: `[["1"]]`, err: "got a string"},
		{raw: `[[-1e400]]`, err: "-1e400 is not a finite number"},
		{raw: `{"a":1}`, err: "X must be an array of rows, got an object"},
		{raw: `"rows"`, err: "got a string"},
		{raw: `null`, err: "X is required"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			if !json.Valid([]byte(tt.raw)) {
				t.Fatalf("test input %s is not JSON", tt.raw)
			}
			m, n, err := parseMatrix("X", json.RawMessage(tt.raw))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err=%v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(m); got != tt.want || n != tt.nonNull {
				t.Fatalf("got %s (%d non-null), want %s (%d)", got, n, tt.want, tt.nonNull)
			}
		})
	}
}

func TestParseVector(t *testing.T) {
	v, n, err := parseVector("y", json.RawMessage(`[1, 2.5, -3]`))
	if err != nil || fmt.Sprint(v) != "[1 2.5 -3]" || n != 3 {
		t.Fatalf("%v %d %v", v, n, err)
	}
	if _, _, err := parseVector("y", json.RawMessage(`[1, null]`)); err == nil || !strings.Contains(err.Error(), "y[1] is null") {
		t.Fatalf("null target: %v", err)
	}
	if _, _, err := parseVector("y", json.RawMessage(`[[1]]`)); err == nil || !strings.Contains(err.Error(), "y[0]: want a number or null, got an array") {
		t.Fatalf("nested: %v", err)
	}
}

func TestEncodeRequestRoundTrip(t *testing.T) {
	X := [][]float64{{1, math.NaN()}, {math.Inf(1), 1e-300}}
	b := encodeRequest(`we"ird`, X, []float64{1, 2}, [][]float64{{0.1, 2}}, json.RawMessage(` "exact" `))
	fields, err := decodeEnvelope(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var r predictRequest
	if err := decodeData(fields, &r); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(r.X[0][1]) || !math.IsNaN(r.X[1][0]) || r.X[1][1] != 1e-300 || r.NonNull != 2+2+2 {
		t.Fatalf("round trip: %v (non-null %d)", r.X, r.NonNull)
	}
	if m, _ := stringField(fields, "model"); m != `we"ird` || string(fields["memory_policy"]) != `"exact"` {
		t.Fatalf("model %q policy %s", m, fields["memory_policy"])
	}
}
