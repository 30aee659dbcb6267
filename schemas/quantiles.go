package schemas

// Prediction intervals of a trigger (its quantiles argument) and its
// large-context settings: what travels from the scheduler to the writer,
// and the rules every role applies alike. The engine has its own checks of
// levels (gpu.ValidateQuantiles); these are the same rules, kept here so
// that contracts import nothing of ours.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// MaxQuantileLevels is the most quantile levels a trigger may ask for (the
// engine's gpu.MaxQuantiles).
const MaxQuantileLevels = 99

// HeaderOutside is the number of query rows of a result that lay outside
// the context's range (see Result.Outside).
const HeaderOutside = "Regressd-Outside"

// LargeContext is a trigger's large_context_policy, large_context_threshold
// and large_context_seed, as the worker hands them to the engine's
// large-context router (gpu/largectx).
type LargeContext struct {
	// Policy is one policy name, or several: a holdout gate among them.
	Policy []string `json:"policy"`
	// Threshold is the context rows above which the policy applies; 0:
	// the engine's default (50,000).
	Threshold int `json:"threshold,omitempty"`
	// Seed seeds the policy's row draws; nil: 0.
	Seed *int64 `json:"seed,omitempty"`
}

// ParseQuantiles reads a trigger's quantiles argument: space-separated
// levels, each a number in (0, 1), at most MaxQuantileLevels. Repeats are
// dropped (one column per level), the order kept. Every bad level is
// named in one error.
func ParseQuantiles(s string) ([]float64, error) {
	var out []float64
	var bad []string
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0 && v < 1) {
			bad = append(bad, strconv.Quote(f))
			continue
		}
		col := QuantileColumn(v)
		if seen[col] {
			continue
		}
		seen[col] = true
		out = append(out, v)
	}
	var errs []error
	if bad != nil {
		errs = append(errs, fmt.Errorf("quantiles: %s not a level in (0, 1) (for example quantiles=0.1 0.9)", strings.Join(bad, ", ")))
	}
	if len(out) > MaxQuantileLevels {
		errs = append(errs, fmt.Errorf("quantiles: %d levels, at most %d", len(out), MaxQuantileLevels))
	}
	if len(out) == 0 && bad == nil && strings.TrimSpace(s) != "" {
		errs = append(errs, errors.New("quantiles: no level given"))
	}
	return out, errors.Join(errs...)
}

// QuantileColumn is the regressed table's column of a level: "p" and the
// level in percent, '_' for its decimal point (0.1 → p10, 0.025 → p2_5,
// 0.5 → p50). The percent is the level's shortest decimal form with the
// point moved two places, so no rounding can make two levels share a
// column.
func QuantileColumn(level float64) string {
	s := strconv.FormatFloat(level, 'f', -1, 64) // "0.025"
	_, frac, _ := strings.Cut(s, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	whole, rest := strings.TrimLeft(frac[:2], "0"), frac[2:]
	if whole == "" {
		whole = "0"
	}
	if rest != "" {
		return "p" + whole + "_" + rest
	}
	return "p" + whole
}

// QuantileColumns are the columns of levels, in their order.
func QuantileColumns(levels []float64) []string {
	out := make([]string, len(levels))
	for i, t := range levels {
		out[i] = QuantileColumn(t)
	}
	return out
}

// ResultSchemaFor is the schema of a task's predictions: ResultSchema,
// then one nullable float64 column per quantile level, named by
// QuantileColumn. Without levels it is ResultSchema.
func ResultSchemaFor(levels []float64) *arrow.Schema {
	if len(levels) == 0 {
		return ResultSchema
	}
	fs := append([]arrow.Field{}, ResultSchema.Fields()...)
	for _, c := range QuantileColumns(levels) {
		fs = append(fs, arrow.Field{Name: c, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	return arrow.NewSchema(fs, nil)
}

// PolicyJSON is the policy as a /predict request's large_context_policy
// carries it: one name as a string, several as a list; nil for none.
func (lc *LargeContext) PolicyJSON() json.RawMessage {
	if lc == nil || len(lc.Policy) == 0 {
		return nil
	}
	var v any = lc.Policy
	if len(lc.Policy) == 1 {
		v = lc.Policy[0]
	}
	b, _ := json.Marshal(v)
	return b
}
