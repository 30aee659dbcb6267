package gateway

// Quantiles and large-context policies asked of a hosted gateway, as the
// vendor's client asks them (output_type, quantiles, large_context_*), and
// checked as it checks them: a gateway that answers without output_type
// ignored the distribution, one that answers a policy without
// large_context_report ignored the policy, and both are errors.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// ErrIgnored is a gateway's 200 that ignored what was asked beyond the
// point: quantiles (no output_type in the answer) or a large-context
// policy (no large_context_report).
var ErrIgnored = errors.New("gateway ignored the request")

// DetailedOptions asks a /predict call for more than the point.
type DetailedOptions struct {
	// Quantiles are the levels, each in (0, 1), sent with
	// output_type=quantiles; nil: none.
	Quantiles []float64
	// LargeContextPolicy is large_context_policy as JSON (a name or a list
	// of names); nil: none. Threshold and Seed go with it when not nil.
	LargeContextPolicy    json.RawMessage
	LargeContextThreshold *int64
	LargeContextSeed      *int64
}

// DetailedAnswer is a /predict answer with its quantiles.
type DetailedAnswer struct {
	Answer
	// Quantiles[q][k] is query q's quantile at DetailedOptions.Quantiles[k];
	// NaN where the gateway sent null. Nil when none were asked.
	Quantiles [][]float64
	// LargeContextReport is the gateway's report, when a policy was sent.
	LargeContextReport json.RawMessage
}

// PredictDetailed is Predict (no memory policy) with quantiles and a
// large-context policy.
func (c *Client) PredictDetailed(ctx context.Context, X [][]float64, y []float64, Xq [][]float64, o DetailedOptions) (*DetailedAnswer, error) {
	if len(X) == 0 || len(Xq) == 0 {
		return nil, errors.New("gateway: X and Xq must each have at least one row")
	}
	if len(y) != len(X) {
		return nil, fmt.Errorf("gateway: %d targets for %d context rows", len(y), len(X))
	}
	body := encodeRequest(c.model, X, y, Xq, nil)
	body = appendDetailed(body[:len(body)-1], o)
	resp, err := c.call(ctx, body)
	if err != nil {
		return nil, err
	}
	preds, err := decodePredictions(resp.Predictions, len(Xq))
	if err != nil {
		return nil, err
	}
	ans := &DetailedAnswer{Answer: Answer{Predictions: preds, Usage: resp.Usage}}
	if o.Quantiles != nil {
		if resp.OutputType == nil || *resp.OutputType != "quantiles" {
			return nil, fmt.Errorf("%w: output_type=quantiles was not honoured (the gateway answers points only)", ErrIgnored)
		}
		if ans.Quantiles, err = decodeQuantiles(resp.Quantiles, len(Xq), len(o.Quantiles)); err != nil {
			return nil, err
		}
		if err := inAskedOrder(ans.Quantiles, resp.Taus, o.Quantiles); err != nil {
			return nil, err
		}
	}
	if o.LargeContextPolicy != nil {
		if len(resp.LargeContextReport) == 0 || isNull(resp.LargeContextReport) {
			return nil, fmt.Errorf("%w: large_context_policy was sent but no large_context_report came back", ErrIgnored)
		}
		ans.LargeContextReport = resp.LargeContextReport
	}
	return ans, nil
}

// appendDetailed adds o's fields to an open request object and closes it.
func appendDetailed(b []byte, o DetailedOptions) []byte {
	if o.Quantiles != nil {
		b = append(b, `,"output_type":"quantiles","quantiles":`...)
		b = appendRow(b, o.Quantiles)
	}
	if o.LargeContextPolicy != nil {
		b = append(b, `,"large_context_policy":`...)
		b = append(b, o.LargeContextPolicy...)
		if o.LargeContextThreshold != nil {
			b = append(b, `,"large_context_threshold":`...)
			b = strconv.AppendInt(b, *o.LargeContextThreshold, 10)
		}
		if o.LargeContextSeed != nil {
			b = append(b, `,"large_context_seed":`...)
			b = strconv.AppendInt(b, *o.LargeContextSeed, 10)
		}
	}
	return append(b, '}')
}

// decodeQuantiles checks the answer's shape, rows × k, nulls as NaN.
func decodeQuantiles(rows [][]*float64, n, k int) ([][]float64, error) {
	if len(rows) != n {
		return nil, fmt.Errorf("%w: %d rows of quantiles for %d query rows", ErrBadResponse, len(rows), n)
	}
	out := make([][]float64, n)
	for q, row := range rows {
		if len(row) != k {
			return nil, fmt.Errorf("%w: query row %d has %d quantiles, %d were asked", ErrBadResponse, q, len(row), k)
		}
		out[q] = make([]float64, k)
		for j, v := range row {
			out[q][j] = math.NaN()
			if v != nil {
				out[q][j] = *v
			}
		}
	}
	return out, nil
}

// inAskedOrder puts each row's columns in the order the levels were asked,
// by the answer's taus: a gateway may list them ascending rather than as
// asked. Without taus the columns are taken to be in the asked order; taus
// that are not the asked levels are a bad response.
func inAskedOrder(rows [][]float64, taus, asked []float64) error {
	if taus == nil {
		return nil
	}
	if len(taus) != len(asked) {
		return fmt.Errorf("%w: %d taus for %d quantile levels asked", ErrBadResponse, len(taus), len(asked))
	}
	col := make([]int, len(asked))
	moved := false
	for j, q := range asked {
		col[j] = slices.IndexFunc(taus, func(t float64) bool { return math.Abs(t-q) <= 1e-9 })
		if col[j] < 0 {
			return fmt.Errorf("%w: level %g was asked but taus are %v", ErrBadResponse, q, taus)
		}
		moved = moved || col[j] != j
	}
	if !moved {
		return nil
	}
	for q, row := range rows {
		out := make([]float64, len(row))
		for j, c := range col {
			out[j] = row[c]
		}
		rows[q] = out
	}
	return nil
}
