package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/largectx"
)

// Output types of the official client (output_type).
const (
	OutputMean      = "mean"
	OutputMedian    = "median"
	OutputQuantiles = "quantiles"
	OutputFull      = "full"
)

// taskAliases are the spellings of the one task served, compared
// case-insensitively after trimming spaces.
var taskAliases = []string{"regression", "regressor", "regress", "reg"}

// checkTask accepts an absent task or a spelling of regression.
func checkTask(task string) error {
	t := strings.ToLower(strings.TrimSpace(task))
	if task == "" {
		return nil
	}
	for _, a := range taskAliases {
		if t == a {
			return nil
		}
	}
	return invalid("task %q is not supported: this gateway serves task \"regression\" (also spelled %s)",
		truncate(task, 64), strings.Join(taskAliases[1:], ", "))
}

// outputOptions are the distribution fields, checked as the official client
// checks them: quantiles only with output_type "quantiles", and required
// there.
type outputOptions struct {
	Type string    // one of the Output constants; "mean" when absent
	Echo bool      // the request named output_type: the response echoes it
	Taus []float64 // levels to compute; nil for mean and median
}

func parseOutput(req *predictRequest) (outputOptions, error) {
	o := outputOptions{Type: OutputMean, Echo: req.OutputType != ""}
	if req.OutputType != "" {
		o.Type = req.OutputType
	}
	switch o.Type {
	case OutputMean, OutputMedian:
		if req.Quantiles != nil {
			return o, invalid("quantiles is only valid with output_type \"quantiles\", not %q", o.Type)
		}
	case OutputQuantiles:
		if len(req.Quantiles) == 0 {
			return o, invalid("output_type \"quantiles\" requires quantiles: a list of 1 to %d levels in (0, 1), e.g. [0.1, 0.5, 0.9]", gpu.MaxQuantiles)
		}
		if err := gpu.ValidateQuantiles(req.Quantiles); err != nil {
			return o, invalid("quantiles: %v", err)
		}
		o.Taus = req.Quantiles
	case OutputFull:
		if req.Quantiles != nil {
			return o, invalid("quantiles is only valid with output_type \"quantiles\"; \"full\" returns the whole bank of %d levels", len(gpu.QuantileBank()))
		}
		o.Taus = gpu.QuantileBank()
	default:
		return o, invalid("output_type %q is not one of mean, median, quantiles, full", truncate(o.Type, 64))
	}
	return o, nil
}

// servedPolicy is the memory_policy with the one field regressd reads
// itself: the engine's Policy gets the other thirteen (stream_context
// among them).
type servedPolicy struct {
	gpu.Policy
	// ReuseContextCache: the context's cache, once built, serves every
	// query chunk of the request (always so here). Default true.
	ReuseContextCache bool
}

// parseMemoryPolicy reads a preset or an object of the 14 policy fields.
func parseMemoryPolicy(raw json.RawMessage) (servedPolicy, error) {
	sp := servedPolicy{ReuseContextCache: true}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return sp, invalid("invalid memory_policy: malformed object: %v", err)
		}
		if v, ok := fields["reuse_context_cache"]; ok {
			delete(fields, "reuse_context_cache")
			if !isNull(v) && json.Unmarshal(v, &sp.ReuseContextCache) != nil {
				return sp, invalid("invalid memory_policy: reuse_context_cache must be a boolean, got %s", gpu.JSONKind(v))
			}
		}
		rest, err := json.Marshal(fields)
		if err != nil {
			return sp, err
		}
		raw = rest
	}
	p, err := gpu.ParsePolicy(raw)
	if err != nil {
		return sp, invalid("%v", err)
	}
	sp.Policy = p
	return sp, nil
}

// parseLargeContext reads large_context_policy, _threshold and _seed.
func parseLargeContext(req *predictRequest) (largectx.Config, bool, error) {
	var lr largectx.Request
	lr.Policy = req.LargePolicy
	var probs []string
	for name, spec := range map[string]struct {
		raw json.RawMessage
		dst **int64
	}{
		"large_context_threshold": {req.LargeThreshold, &lr.Threshold},
		"large_context_seed":      {req.LargeSeed, &lr.Seed},
	} {
		if spec.raw == nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(spec.raw)), 10, 64)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s must be an integer, got %s", name, truncate(string(spec.raw), 32)))
			continue
		}
		*spec.dst = &n
	}
	if probs != nil {
		return largectx.Config{}, false, invalid("%s", strings.Join(probs, "; "))
	}
	cfg, err := largectx.ParseRequest(lr)
	if err != nil {
		var ce *largectx.ConfigError
		if errors.As(err, &ce) {
			return cfg, false, invalid("%s", strings.Join(ce.Problems, "; "))
		}
		return cfg, false, invalid("%v", err)
	}
	return cfg, cfg.Policy != nil, nil
}
