package scheduler

// Trigger arguments for prediction intervals (quantiles) and large
// contexts (large_context_policy, large_context_threshold,
// large_context_seed). Like the write target they belong to the trigger: a
// request body cannot set them.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// The arguments of this file, all empty by default.
const (
	argQuantiles             = "quantiles"
	argLargeContextPolicy    = "large_context_policy"
	argLargeContextThreshold = "large_context_threshold"
	argLargeContextSeed      = "large_context_seed"
)

func init() {
	for _, k := range []string{argQuantiles, argLargeContextPolicy, argLargeContextThreshold, argLargeContextSeed} {
		argDefaults[k] = ""
	}
}

// resolveQuantileArgs reads quantiles and large_context_* into run,
// adding their problems to errs.
func resolveQuantileArgs(args map[string]string, run *Run, errs []error) []error {
	if s := strings.TrimSpace(args[argQuantiles]); s != "" {
		levels, err := schemas.ParseQuantiles(s)
		if err != nil {
			errs = append(errs, err)
		}
		run.Args.Quantiles = levels
		errs = checkQuantileColumns(run.Args, errs)
	}
	lc, err := parseLargeContext(args)
	if err != nil {
		errs = append(errs, err)
	}
	run.Args.LargeContext = lc
	return errs
}

// checkQuantileColumns refuses quantile columns that would clash with a
// column the regressed table holds already: the provenance columns and
// the tags the trigger names. The source table's other tags are checked
// when it is read (producer.CheckSchema).
func checkQuantileColumns(a schemas.RunArgs, errs []error) []error {
	for _, c := range schemas.QuantileColumns(a.Quantiles) {
		if slices.Contains(tsdb.Reserved, c) {
			errs = append(errs, fmt.Errorf("quantiles: column %q is a provenance column of the regressed table", c))
		}
		if _, ok := a.Tags[c]; ok {
			errs = append(errs, fmt.Errorf("quantiles: the column %q of the level would clash with the tag %q in the regressed table: rename the tag column, or ask for another level", c, c))
		}
	}
	return errs
}

// parseLargeContext reads the large_context_* arguments: a policy name
// (with its parameters in brackets) or several names separated by spaces
// (a holdout gate among them), a threshold in context rows and a seed.
// The engine's own rules (gpu/largectx) check them, so a trigger is
// refused when it is created rather than on its first run.
func parseLargeContext(args map[string]string) (*schemas.LargeContext, error) {
	policy := strings.Fields(args[argLargeContextPolicy])
	thr, seed := strings.TrimSpace(args[argLargeContextThreshold]), strings.TrimSpace(args[argLargeContextSeed])
	if len(policy) == 0 && thr == "" && seed == "" {
		return nil, nil
	}
	var req largectx.Request
	var probs []string
	if len(policy) > 0 {
		req.Policy = (&schemas.LargeContext{Policy: policy}).PolicyJSON()
	}
	whole := func(key, v string) *int64 {
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %q is not a whole number", key, v))
			return nil
		}
		return &n
	}
	req.Threshold, req.Seed = whole(argLargeContextThreshold, thr), whole(argLargeContextSeed, seed)
	if probs != nil {
		return nil, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	if _, err := largectx.ParseRequest(req); err != nil {
		return nil, err
	}
	lc := &schemas.LargeContext{Policy: policy, Seed: req.Seed}
	if req.Threshold != nil {
		lc.Threshold = int(*req.Threshold)
	}
	return lc, nil
}

// tomlListArg is a config file's list for quantiles (numbers) or
// large_context_policy (names) in the arguments' string form; ok is false
// for other keys.
func tomlListArg(k string, v []any) (s string, ok bool, err error) {
	what := map[string]string{argQuantiles: "level", argLargeContextPolicy: "policy name"}[k]
	if what == "" {
		return "", false, nil
	}
	parts := make([]string, len(v))
	for i, e := range v {
		switch e := e.(type) {
		case float64:
			if k == argQuantiles {
				parts[i] = strconv.FormatFloat(e, 'g', -1, 64)
				continue
			}
		case string:
			if k == argLargeContextPolicy && !strings.ContainsAny(e, " \t\n\r") {
				parts[i] = e
				continue
			}
			return "", true, fmt.Errorf("%s: %q is not a %s", k, e, what)
		}
		return "", true, fmt.Errorf("%s: a %T in the list is not a %s", k, e, what)
	}
	return strings.Join(parts, " "), true, nil
}
