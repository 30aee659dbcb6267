package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/gpu/largectx/largectxtest"
	"github.com/regressd/regressd/schemas"
)

// nextQuantiles waits for the next result and decodes it with its
// quantile columns: the values and, per level, a column (NaN for null).
func (f *fixture) nextQuantiles(cons jetstream.Consumer, levels []float64) (schemas.Result, []float64, [][]float64) {
	f.t.Helper()
	msg, err := cons.Next(jetstream.FetchMaxWait(60e9))
	if err != nil {
		f.t.Fatalf("no result: %v", err)
	}
	msg.Ack()
	var metas schemas.TaskMetas
	r, err := metas.DecodeResult(msg.Headers())
	if err != nil || r.Status != schemas.StatusOK {
		f.t.Fatalf("result %+v: %v", r, err)
	}
	rec, err := schemas.DecodeRecord(msg.Data(), schemas.ResultSchemaFor(levels))
	if err != nil {
		f.t.Fatal(err)
	}
	defer rec.Release()
	col := func(i int) []float64 {
		c := rec.Column(i).(*array.Float64)
		out := make([]float64, c.Len())
		for j := range out {
			out[j] = math.NaN()
			if c.IsValid(j) {
				out[j] = c.Value(j)
			}
		}
		return out
	}
	qs := make([][]float64, len(levels))
	for k := range levels {
		qs[k] = col(2 + k)
	}
	return r, col(1), qs
}

// A task that asks for quantiles gets one column per level in its result,
// around the point and monotone in the level, and the result counts the
// rows outside the context's range (x beyond 1…10).
func TestQuantilesAndOutsideReachTheResult(t *testing.T) {
	f := startWorker(t, NewLocal(4), Config{})
	f.meta.Model = "regressd/model-2l"
	f.meta.Quantiles = []float64{0.9, 0.1, 0.5}
	cons := f.results()
	f.publishBatch(0, 2.5, 5.5, 40, 60)
	r, vals, qs := f.nextQuantiles(cons, f.meta.Quantiles)
	if r.Rows != 4 || len(vals) != 4 {
		t.Fatalf("result %+v, values %v", r, vals)
	}
	for i := range vals {
		p90, p10, p50 := qs[0][i], qs[1][i], qs[2][i]
		if !(p10 <= p50 && p50 <= p90) || !(p10 < vals[i] && vals[i] < p90) {
			t.Errorf("row %d: p10 %v p50 %v p90 %v around %v: not monotone around the point", i, p10, p50, p90, vals[i])
		}
	}
	if math.Abs(vals[0]-5) > 1 || math.Abs(vals[1]-11) > 1 {
		t.Errorf("inside the context's range %v, want about 5 and 11 (y = 2x)", vals[:2])
	}
	if r.Outside != 2 {
		t.Errorf("outside %d, want 2 (x = 40 and 60 lie beyond the context's 1…10)", r.Outside)
	}
}

// A predictor that answers points only (the bench predictor) refuses a
// task's quantiles with a 400 saying why, rather than writing points
// without them.
func TestPointOnlyPredictorRefusesQuantiles(t *testing.T) {
	f := startWorker(t, NewBenchPredictor(), Config{})
	f.meta.Quantiles = []float64{0.1, 0.9}
	cons := f.results()
	f.publishBatch(0, 1)
	r, _ := f.nextResult(cons)
	if r.Status != schemas.StatusFailed || r.Code != http.StatusBadRequest || !strings.Contains(r.Message, "quantiles are not supported") {
		t.Fatalf("result %+v, want a 400 refusing quantiles", r)
	}
}

// A hosted gateway is asked for quantiles as the vendor's client asks
// (output_type=quantiles, the levels in order) and its quantiles are
// returned; one that answers points only (no output_type) or ignores a
// large-context policy (no large_context_report) is refused with a 400.
func TestRemoteQuantiles(t *testing.T) {
	var got map[string]any
	honour, ascending, wrongTaus := true, false, false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = nil
		json.NewDecoder(r.Body).Decode(&got)
		ans := map[string]any{"predictions": []any{1.0, nil}}
		switch {
		case honour && ascending:
			ans["output_type"], ans["taus"] = "quantiles", []float64{0.1, 0.9}
			ans["quantiles"] = []any{[]any{0.5, 1.5}, []any{nil, nil}}
		case honour && wrongTaus:
			ans["output_type"], ans["taus"] = "quantiles", []float64{0.1, 0.8}
			ans["quantiles"] = []any{[]any{0.5, 1.5}, []any{nil, nil}}
		case honour:
			ans["output_type"], ans["taus"] = "quantiles", got["quantiles"]
			ans["quantiles"] = []any{[]any{1.5, 0.5}, []any{nil, nil}}
		}
		json.NewEncoder(w).Encode(ans)
	}))
	defer srv.Close()
	rem, err := NewRemote(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Model: "synthefy/nori-30m", Key: "k", X: [][]float64{{1}, {2}}, Y: []float64{1, 2}, Xq: [][]float64{{1}, {3}}, Quantiles: []float64{0.9, 0.1}}
	d, err := rem.PredictDetailed(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got["output_type"] != "quantiles" || fmt.Sprint(got["quantiles"]) != "[0.9 0.1]" {
		t.Fatalf("request %v: want output_type=quantiles and the levels in order", got)
	}
	if len(d.Quantiles) != 2 || d.Quantiles[0][0] != 1.5 || d.Quantiles[0][1] != 0.5 || !math.IsNaN(d.Quantiles[1][0]) || d.Values[0] != 1 {
		t.Fatalf("answer %+v", d)
	}
	// A gateway that lists its levels ascending (taus [0.1 0.9]) has its
	// columns put back in the asked order; taus that are not the levels
	// asked are a bad answer, not quantiles in the wrong columns.
	ascending = true
	if d, err = rem.PredictDetailed(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if d.Quantiles[0][0] != 1.5 || d.Quantiles[0][1] != 0.5 {
		t.Fatalf("ascending taus: row 0 %v, want [1.5 0.5] (p90 first, as asked)", d.Quantiles[0])
	}
	ascending, wrongTaus = false, true
	if _, err = rem.PredictDetailed(context.Background(), req); err == nil || !strings.Contains(err.Error(), "taus") {
		t.Fatalf("taus that are not the asked levels: %v, want an error naming taus", err)
	}
	wrongTaus = false
	honour = false
	_, err = rem.PredictDetailed(context.Background(), req)
	if !IsFinal(err) || callerStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "output_type=quantiles was not honoured") {
		t.Fatalf("a gateway answering points only: %v, want a 400 saying so", err)
	}
	req.Quantiles, req.LargeContext = nil, &schemas.LargeContext{Policy: []string{"random", "cluster_route"}}
	_, err = rem.PredictDetailed(context.Background(), req)
	if callerStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "no large_context_report") ||
		fmt.Sprint(got["large_context_policy"]) != "[random cluster_route]" {
		t.Fatalf("a gateway ignoring the policy: %v (request %v)", err, got)
	}
}

// large_context_* reach gpu/largectx: above the threshold the context is
// routed by the policy (here one seeded random window), exactly as the
// router answers on its own, with quantiles from the window's engine.
func TestLargeContextIsRouted(t *testing.T) {
	X, y := largectxtest.Regions(1200, 1)
	Xq, _ := largectxtest.Regions(40, 2)
	const model = "regressd/model-2l"
	seed := int64(11)
	l := NewLocal(4)
	l.window = 200
	req := Request{Model: model, ContextID: "big", X: X, Y: y, Xq: Xq, Quantiles: []float64{0.1, 0.9},
		LargeContext: &schemas.LargeContext{Policy: []string{"random"}, Threshold: 1000, Seed: &seed}}
	got, err := l.PredictDetailed(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	p, err := largectx.ParsePolicy("random")
	if err != nil {
		t.Fatal(err)
	}
	newReg := func() (*gpu.Regressor, error) { return gpu.NewRegressor(model) }
	want, rep, err := largectx.Predict(context.Background(), largectx.Config{Policy: &p, Threshold: 1000, Window: 200, Seed: 11}, newReg, X, y, Xq)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Applied || !slices.Equal(got.Values, want) {
		t.Fatalf("worker's predictions differ from the router's random window (applied %v)", rep.Applied)
	}
	for q, row := range got.Quantiles {
		if len(row) != 2 || !(row[0] <= got.Values[q] && got.Values[q] <= row[1]) {
			t.Fatalf("row %d: quantiles %v around %v", q, row, got.Values[q])
		}
	}
	// Another seed draws another window; a plain request (no policy) is
	// fitted apart from the routed one.
	other := int64(12)
	req.LargeContext = &schemas.LargeContext{Policy: []string{"random"}, Threshold: 1000, Seed: &other}
	if again, err := l.PredictDetailed(context.Background(), req); err != nil || slices.Equal(again.Values, got.Values) {
		t.Fatalf("seed 12: %v (same predictions as seed 11: the settings are not part of the fit's key)", err)
	}
	req.LargeContext = &schemas.LargeContext{Policy: []string{"nearest"}}
	req.ContextID = "bad"
	if _, err := l.PredictDetailed(context.Background(), req); callerStatus(err) != http.StatusBadRequest {
		t.Fatalf("unknown policy: %v, want a 400", err)
	}
}
