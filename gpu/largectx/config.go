package largectx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error Parse, ParseRequest and
// Config.Validate return: the caller's mistake, a 4xx.
var ErrInvalid = errors.New("invalid large-context settings")

// ConfigError lists every problem found in one set of large-context
// settings. It matches ErrInvalid.
type ConfigError struct {
	// Problems are short lowercase sentences, one per problem.
	Problems []string
}

func (e *ConfigError) Error() string {
	return ErrInvalid.Error() + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ConfigError) Unwrap() error { return ErrInvalid }

// Bounds and defaults of the request fields (the vendor's contract).
const (
	// DefaultThreshold is the context rows above which a policy applies.
	DefaultThreshold = 50_000
	// MaxThreshold bounds large_context_threshold.
	MaxThreshold = 10_000_000
	// MaxSeed bounds large_context_seed (2³²−1).
	MaxSeed = 1<<32 - 1
)

// DefaultWindow is the most context rows one internal engine call takes
// when Config.Window is unset: one GP expert of model-4l, so that no
// call's solve is chunked and each call's fit stays a few seconds on two
// cores (docs/ENGINE.md, "Large contexts").
const DefaultWindow = 2048

// Config is how a large context is handled. The zero Config has no
// policy: every context is fitted whole, as without this package.
type Config struct {
	// Policy is the large_context_policy; nil means none.
	Policy *Policy
	// Threshold is the context rows above which Policy applies, in
	// [1, MaxThreshold]; 0 means DefaultThreshold (50,000).
	Threshold int
	// Seed seeds every row draw and clustering, so equal inputs give equal
	// predictions. Default 0.
	Seed uint32
	// Window is the most context rows one internal engine call takes; 0
	// means DefaultWindow (2,048). Not a request field: the server's.
	Window int
	// Parallel is how many internal calls run at once; 0 means GOMAXPROCS.
	// Each call parallelises inside too, so more than the cores the
	// process may use gains nothing. Not a request field.
	Parallel int
	// FullFits fits each window of a policy in full, with its own
	// hyperparameter search and readout, instead of like one base fitted
	// on a sample of the table (shared.go): about 5× the CPU at 100k rows.
	// Not a request field: for measuring what sharing costs in accuracy.
	FullFits bool
}

func (c Config) threshold() int {
	if c.Threshold == 0 {
		return DefaultThreshold
	}
	return c.Threshold
}

func (c Config) window() int {
	if c.Window == 0 {
		return DefaultWindow
	}
	return c.Window
}

func (c Config) parallel() int {
	if c.Parallel == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return c.Parallel
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var probs []string
	if c.Threshold < 0 || c.Threshold > MaxThreshold {
		probs = append(probs, fmt.Sprintf("large_context_threshold %d is not in [1, %d]", c.Threshold, MaxThreshold))
	}
	if c.Window < 0 {
		probs = append(probs, fmt.Sprintf("window %d is negative", c.Window))
	}
	if c.Parallel < 0 {
		probs = append(probs, fmt.Sprintf("parallel %d is negative", c.Parallel))
	}
	if c.Policy != nil {
		if err := c.Policy.validate(); err != nil {
			probs = append(probs, err.Error())
		}
	}
	if probs != nil {
		return &ConfigError{Problems: probs}
	}
	return nil
}

// validate checks a Policy built by hand rather than parsed.
func (p Policy) validate() error {
	switch p.Name {
	case Random:
		if p.Groups != 0 || p.Candidates != nil || p.Holdout != "" {
			return fmt.Errorf("policy random takes no groups, candidates or holdout")
		}
	case ClusterRoute, ClusterRouteG4:
		if p.Groups < 1 || p.Groups > MaxGroups {
			return fmt.Errorf("policy %s: groups %d is not in [1, %d]", p.Name, p.Groups, MaxGroups)
		}
		if p.Candidates != nil || p.Holdout != "" {
			return fmt.Errorf("policy %s takes no candidates or holdout", p.Name)
		}
	case HoldoutGate:
		if len(p.Candidates) == 0 || len(p.Candidates) > MaxCandidates {
			return fmt.Errorf("a holdout gate takes 1 to %d candidates, not %d", MaxCandidates, len(p.Candidates))
		}
		if p.Holdout != HoldoutRandom && p.Holdout != HoldoutTail {
			return fmt.Errorf("holdout %q is not %q or %q", p.Holdout, HoldoutRandom, HoldoutTail)
		}
		for _, c := range p.Candidates {
			if c.IsGate() {
				return fmt.Errorf("a gate cannot be a gate's candidate")
			}
			if err := c.validate(); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown policy %q; known policies: %s", p.Name, knownNames)
	}
	return nil
}

// Request is the large-context part of a request, as it arrives.
type Request struct {
	// Policy is large_context_policy as raw JSON: a name, a list of names
	// (a holdout gate among them), true (the default, cluster_route), or
	// absent/null for none.
	Policy json.RawMessage
	// Threshold is large_context_threshold, nil when absent.
	Threshold *int64
	// Seed is large_context_seed, nil when absent.
	Seed *int64
	// Holdout is large_context_holdout (the vendor's newer field):
	// "random" or "tail", for a list or holdout_gate; nil when absent.
	Holdout *string
}

// Parse is ParseRequest for the three fields of the reference contract.
func Parse(policy json.RawMessage, threshold, seed *int64) (Config, error) {
	return ParseRequest(Request{Policy: policy, Threshold: threshold, Seed: seed})
}

// ParseRequest validates a request's large-context fields and returns the
// Config they ask for, listing every problem at once. A threshold, seed or
// holdout without a policy is an error (the reference's rule: they would
// otherwise be silently ignored).
func ParseRequest(r Request) (Config, error) {
	var c Config
	var probs []string
	p, hasPolicy, err := parsePolicyJSON(r.Policy)
	if err != nil {
		probs = append(probs, err.Error())
	}
	if hasPolicy {
		c.Policy = &p
	}
	if !hasPolicy && err == nil && (r.Threshold != nil || r.Seed != nil || r.Holdout != nil) {
		// Name only the fields this request has: not every front end
		// takes a holdout.
		var sent []string
		if r.Threshold != nil {
			sent = append(sent, "large_context_threshold")
		}
		if r.Seed != nil {
			sent = append(sent, "large_context_seed")
		}
		if r.Holdout != nil {
			sent = append(sent, "large_context_holdout")
		}
		probs = append(probs, strings.Join(sent, " and ")+" without large_context_policy: send a policy or leave them out")
	}
	if r.Threshold != nil {
		if t := *r.Threshold; t < 1 || t > MaxThreshold {
			probs = append(probs, fmt.Sprintf("large_context_threshold %d is not a row count in [1, %d]", t, MaxThreshold))
		} else {
			c.Threshold = int(t)
		}
	}
	if r.Seed != nil {
		if s := *r.Seed; s < 0 || s > MaxSeed {
			probs = append(probs, fmt.Sprintf("large_context_seed %d is not in [0, %d]", s, int64(MaxSeed)))
		} else {
			c.Seed = uint32(s)
		}
	}
	if r.Holdout != nil && hasPolicy {
		switch h := *r.Holdout; {
		case !p.IsGate():
			probs = append(probs, fmt.Sprintf("large_context_holdout applies to a list of policies or holdout_gate, not to %s", p))
		case h != HoldoutRandom && h != HoldoutTail:
			probs = append(probs, fmt.Sprintf("large_context_holdout %q is not %q or %q", h, HoldoutRandom, HoldoutTail))
		default:
			c.Policy.Holdout = h
		}
	}
	if probs != nil {
		return Config{}, &ConfigError{Problems: probs}
	}
	return c, nil
}

// parsePolicyJSON reads large_context_policy; ok is false when it is absent
// or null.
func parsePolicyJSON(raw json.RawMessage) (p Policy, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Policy{}, false, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return Policy{}, false, fmt.Errorf("large_context_policy is not valid JSON: %v", err)
	}
	switch t := v.(type) {
	case bool:
		if !t {
			return Policy{}, false, errors.New("large_context_policy false is not a policy; leave the field out (or null) for none")
		}
		return Policy{Name: ClusterRoute, Groups: DefaultGroups}, true, nil
	case string:
		p, err := ParsePolicy(t)
		if err != nil {
			return Policy{}, false, fmt.Errorf("large_context_policy: %w", err)
		}
		return p, true, nil
	case []any:
		specs := make([]string, len(t))
		for i, e := range t {
			s, isStr := e.(string)
			if !isStr {
				return Policy{}, false, fmt.Errorf("large_context_policy[%d] is not a policy name", i)
			}
			specs[i] = s
		}
		p, err := gateOf(specs)
		if err != nil {
			return Policy{}, false, fmt.Errorf("large_context_policy: %w", err)
		}
		return p, true, nil
	}
	return Policy{}, false, errors.New("large_context_policy must be a policy name, a list of names or true")
}
