package worker

// Predictions with more than the point: the quantiles a trigger asks for,
// and how many query rows lay outside the context's range; and the routing
// of large contexts (gpu/largectx).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/schemas"
)

// Detailed is a batch's predictions with their details.
type Detailed struct {
	// Values has one prediction per query row; NaN means none.
	Values []float64
	// Quantiles[q][k] is row q's quantile at Request.Quantiles[k]; nil when
	// none were asked.
	Quantiles [][]float64
	// Outside counts the query rows outside the context's range (beyond a
	// column's range, or far from every context row); 0 when the
	// predictor cannot tell.
	Outside int
}

// DetailedPredictor is a Predictor that also answers quantiles and
// large-context requests.
type DetailedPredictor interface {
	Predictor
	// PredictDetailed is Predict with the request's quantiles and the
	// count of rows outside the context.
	PredictDetailed(ctx context.Context, req Request) (*Detailed, error)
}

var _ DetailedPredictor = (*Local)(nil)

// refusedError is a request the predictor cannot serve, the caller's to
// fix: final, and answered with Status.
type refusedError struct {
	err    error
	Status int
}

func (e refusedError) Error() string { return e.err.Error() }
func (e refusedError) Unwrap() error { return e.err }

// refuse marks err as a final refusal answering status.
func refuse(status int, err error) error { return Final(refusedError{err, status}) }

// refusedStatus is the status of a refusal, 0 for other errors.
func refusedStatus(err error) int {
	var r refusedError
	if errors.As(err, &r) {
		return r.Status
	}
	return 0
}

// predictDetailed asks p for the batch with its details: through
// PredictDetailed when p has it, else Predict, refusing what Predict
// cannot answer (quantiles, a large-context policy).
func predictDetailed(ctx context.Context, p Predictor, req Request) (*Detailed, error) {
	if d, ok := p.(DetailedPredictor); ok {
		return d.PredictDetailed(ctx, req)
	}
	if err := plainOnly(req); err != nil {
		return nil, err
	}
	v, err := p.Predict(ctx, req)
	if err != nil {
		return nil, err
	}
	return &Detailed{Values: v}, nil
}

// plainOnly refuses a request for quantiles or a large-context policy
// from a predictor that answers points only.
func plainOnly(req Request) error {
	switch {
	case len(req.Quantiles) > 0:
		return refuse(http.StatusBadRequest, errors.New("quantiles are not supported by this worker's predictor, which answers points only: remove quantiles from the trigger or run the worker with the built-in engine"))
	case req.LargeContext != nil:
		return refuse(http.StatusBadRequest, errors.New("large_context_* arguments are not supported by this worker's predictor, which answers points only: remove them from the trigger or run the worker with the built-in engine"))
	}
	return nil
}

// PredictDetailed is Predict with the request's quantiles (each monotone
// in its level) and the rows outside the context's range, from the same
// fit.
func (l *Local) PredictDetailed(ctx context.Context, req Request) (*Detailed, error) {
	ctx, cancel := withTimeout(ctx, req.Timeout)
	defer cancel()
	f, err := l.fitted(ctx, req)
	if err != nil {
		return nil, err
	}
	defer l.release(f)
	opts := gpu.PredictOptions{Quantiles: req.Quantiles}
	d := &Detailed{Values: make([]float64, len(req.Xq))}
	if req.Quantiles != nil {
		d.Quantiles = make([][]float64, len(req.Xq))
	}
	outside := make([]bool, len(req.Xq))
	place := func(p *gpu.Prediction, idx []int) {
		for a, q := range idx {
			d.Values[q], outside[q] = p.Mean[a], p.Outside[a]
			if d.Quantiles != nil {
				d.Quantiles[q] = p.Quantiles[a]
			}
		}
	}
	done := l.observe(f)
	if f.m != nil {
		_, err = f.m.Answer(ctx, req.Xq, func(ctx context.Context, reg *gpu.Regressor, rows [][]float64, idx []int) error {
			p, err := reg.PredictDetailed(ctx, rows, opts)
			if err != nil {
				return err
			}
			place(p, idx)
			return nil
		})
	} else {
		var p *gpu.Prediction
		if p, err = f.r.PredictDetailed(ctx, req.Xq, opts); err == nil {
			all := make([]int, len(req.Xq))
			for i := range all {
				all[i] = i
			}
			place(p, all)
		}
	}
	done(err)
	switch {
	case stopped(err):
		return nil, fmt.Errorf("predict: %w", err)
	case errors.Is(err, gpu.ErrBadQuantiles):
		return nil, refuse(http.StatusBadRequest, fmt.Errorf("predict: %w", err))
	case err != nil:
		return nil, Final(fmt.Errorf("predict: %w", err))
	}
	for q, o := range outside {
		if o && !math.IsNaN(d.Values[q]) {
			d.Outside++
		}
	}
	return d, nil
}

// PredictDetailed is Predict that also sends the request's quantiles
// (output_type=quantiles) and large-context settings, as the vendor's
// client sends them. A gateway that ignores them (an answer without
// output_type or large_context_report) is refused with a 400 naming what
// it ignored, rather than writing points without their quantiles.
func (r *Remote) PredictDetailed(ctx context.Context, req Request) (*Detailed, error) {
	if req.Quantiles == nil && req.LargeContext == nil {
		v, err := r.Predict(ctx, req)
		if err != nil {
			return nil, err
		}
		return &Detailed{Values: v}, nil
	}
	c, err := r.client(req)
	if err != nil {
		return nil, err
	}
	o := gateway.DetailedOptions{Quantiles: req.Quantiles}
	if lc := req.LargeContext; lc != nil {
		o.LargeContextPolicy, o.LargeContextSeed = lc.PolicyJSON(), lc.Seed
		if lc.Threshold > 0 {
			t := int64(lc.Threshold)
			o.LargeContextThreshold = &t
		}
	}
	ans, err := c.PredictDetailed(ctx, req.X, req.Y, req.Xq, o)
	r.Metrics.GatewayCall(gatewayOutcome(ctx, err))
	switch {
	case errors.Is(err, gateway.ErrIgnored):
		return nil, refuse(http.StatusBadRequest, fmt.Errorf("%w: the hosted gateway (--gateway-url) does not support what the trigger asks (quantiles, large_context_*); remove those arguments or run the worker with the built-in engine", err))
	case err != nil && gateway.IsTransient(err):
		return nil, err
	case err != nil:
		return nil, Final(err)
	}
	return &Detailed{Values: ans.Predictions, Quantiles: ans.Quantiles}, nil
}

// largeContextKey tells apart fits of one context under different
// large-context settings.
func largeContextKey(lc *schemas.LargeContext) string {
	if lc == nil {
		return ""
	}
	seed := int64(0)
	if lc.Seed != nil {
		seed = *lc.Seed
	}
	return fmt.Sprintf("|lc:%q:%d:%d", lc.Policy, lc.Threshold, seed)
}

// fitLarge fits a request's context under its large-context settings: the
// whole context below the threshold, the policy's windows (fitted on the
// first batch that needs them) above it.
func fitLarge(ctx context.Context, req Request, opts []gpu.Option, window int) (*largectx.Model, error) {
	lc := req.LargeContext
	creq := largectx.Request{Policy: lc.PolicyJSON(), Seed: lc.Seed}
	if lc.Threshold > 0 {
		t := int64(lc.Threshold)
		creq.Threshold = &t
	}
	cfg, err := largectx.ParseRequest(creq)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, err)
	}
	cfg.Window = window
	newReg := func() (*gpu.Regressor, error) { return gpu.NewRegressor(req.Model, opts...) }
	m, err := largectx.Fit(ctx, cfg, newReg, req.X, req.Y)
	switch {
	case stopped(err):
		return nil, fmt.Errorf("fit context: %w", err)
	case errors.Is(err, largectx.ErrThinkingModel) || errors.Is(err, largectx.ErrInvalid):
		return nil, refuse(http.StatusBadRequest, fmt.Errorf("fit context: %w", err))
	case err != nil:
		return nil, Final(fmt.Errorf("fit context: %w", err))
	}
	return m, nil
}

// resultRecord is a batch's predictions as the writer reads them
// (schemas.ResultSchemaFor): time, value, then one column per quantile
// level. A non-finite number is null.
func resultRecord(times *array.Timestamp, preds *Detailed, levels []float64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.ResultSchemaFor(levels))
	defer b.Release()
	appendResult(b, times, 0, preds, levels)
	return b.NewRecordBatch()
}

// appendResult appends predictions to a result record's builder, the
// i-th at times.Value(from+i).
func appendResult(b *array.RecordBuilder, times *array.Timestamp, from int, preds *Detailed, levels []float64) {
	n := len(preds.Values)
	tb := b.Field(0).(*array.TimestampBuilder)
	tb.Reserve(n)
	for i := range n {
		tb.UnsafeAppend(times.Value(from + i))
	}
	appendFloats(b.Field(1).(*array.Float64Builder), n, func(i int) float64 { return preds.Values[i] })
	for k := range levels {
		appendFloats(b.Field(2+k).(*array.Float64Builder), n, func(i int) float64 {
			if preds.Quantiles[i] == nil || k >= len(preds.Quantiles[i]) {
				return math.NaN()
			}
			return preds.Quantiles[i][k]
		})
	}
}

func appendFloats(vb *array.Float64Builder, n int, at func(int) float64) {
	vb.Reserve(n)
	for i := range n {
		if v := at(i); math.IsNaN(v) || math.IsInf(v, 0) {
			vb.UnsafeAppendBoolToBitmap(false)
		} else {
			vb.UnsafeAppend(v)
		}
	}
}
