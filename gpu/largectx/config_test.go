package largectx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func i64(v int64) *int64 { return &v }

// req is a request's large-context fields, the policy as JSON text.
type req struct {
	policy    string
	threshold *int64
	seed      *int64
	holdout   *string
}

func (r req) parse() (Config, error) {
	return ParseRequest(Request{Policy: json.RawMessage(r.policy), Threshold: r.threshold, Seed: r.seed, Holdout: r.holdout})
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req             // large_context_threshold, _seed and _holdout as they arrive
		label    string // "" when no policy
		wantThr  int
		wantSeed uint32
		wantHold string
	}{
		{name: "absent", req: req{policy: ``}},
		{name: "null", req: req{policy: `null`}},
		{name: "default by true", req: req{policy: `true`}, label: "cluster_route"},
		{name: "random", req: req{policy: `"random"`}, label: "random"},
		{name: "cluster_route", req: req{policy: `"cluster_route"`}, label: "cluster_route"},
		{name: "g4", req: req{policy: `"cluster_route_g4"`}, label: "cluster_route_g4"},
		{name: "groups", req: req{policy: `" cluster_route[ groups = 16 ] "`}, label: "cluster_route[groups=16]"},
		{name: "default groups named", req: req{policy: `"cluster_route[groups=8]"`}, label: "cluster_route"},
		{name: "named gate", req: req{policy: `"holdout_gate"`}, label: "gate[random,cluster_route]", wantHold: "random"},
		{name: "named tail gate", req: req{policy: `"holdout_gate[holdout=tail]"`}, label: "gate[random,cluster_route]", wantHold: "tail"},
		{name: "list", req: req{policy: `["random","cluster_route_g4","cluster_route[groups=3]"]`}, label: "gate[random,cluster_route_g4,cluster_route[groups=3]]", wantHold: "random"},
		{name: "list tail", req: req{policy: `["random","cluster_route"]`, holdout: strPtr("tail")}, label: "gate[random,cluster_route]", wantHold: "tail"},
		{name: "bounds", req: req{policy: `"random"`, threshold: i64(1), seed: i64(0)}, label: "random", wantThr: 1},
		{name: "upper bounds", req: req{policy: `"random"`, threshold: i64(MaxThreshold), seed: i64(MaxSeed)}, label: "random", wantThr: MaxThreshold, wantSeed: MaxSeed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.parse()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed config does not validate: %v", err)
			}
			if tc.label == "" {
				if c.Policy != nil {
					t.Fatalf("policy %v, want none", *c.Policy)
				}
				return
			}
			if c.Policy == nil {
				t.Fatal("no policy")
			}
			if got := c.Policy.String(); got != tc.label {
				t.Errorf("policy %q, want %q", got, tc.label)
			}
			if c.Threshold != tc.wantThr || c.Seed != tc.wantSeed || c.Policy.Holdout != tc.wantHold {
				t.Errorf("threshold %d seed %d holdout %q, want %d %d %q", c.Threshold, c.Seed, c.Policy.Holdout, tc.wantThr, tc.wantSeed, tc.wantHold)
			}
		})
	}
}

func strPtr(s string) *string { return &s }

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		req
		want []string // each must appear in the message
	}{
		{name: "unknown name lists the known", req: req{policy: `"clusterboost"`}, want: []string{`unknown policy "clusterboost"`, "random, cluster_route, cluster_route_g4, holdout_gate"}},
		{name: "threshold without policy", req: req{threshold: i64(100)}, want: []string{"without large_context_policy"}},
		{name: "seed without policy", req: req{policy: `null`, seed: i64(3)}, want: []string{"without large_context_policy"}},
		{name: "holdout without policy", req: req{holdout: strPtr("tail")}, want: []string{"without large_context_policy"}},
		{name: "threshold zero", req: req{policy: `"random"`, threshold: i64(0)}, want: []string{"large_context_threshold 0 is not"}},
		{name: "threshold too large", req: req{policy: `"random"`, threshold: i64(MaxThreshold + 1)}, want: []string{"large_context_threshold 10000001"}},
		{name: "seed negative", req: req{policy: `"random"`, seed: i64(-1)}, want: []string{"large_context_seed -1"}},
		{name: "seed too large", req: req{policy: `"random"`, seed: i64(1 << 32)}, want: []string{"large_context_seed 4294967296"}},
		{name: "every problem at once", req: req{policy: `"random"`, threshold: i64(0), seed: i64(-1)}, want: []string{"large_context_threshold 0", "large_context_seed -1"}},
		{name: "empty list", req: req{policy: `[]`}, want: []string{"empty list"}},
		{name: "list too long", req: req{policy: `["random","random","random","random","random","random","random","random","random"]`}, want: []string{"more than the 8"}},
		{name: "gate in a list", req: req{policy: `["random","holdout_gate"]`}, want: []string{"cannot be one of its candidates"}},
		{name: "non-string in a list", req: req{policy: `["random",3]`}, want: []string{"large_context_policy[1] is not a policy name"}},
		{name: "false", req: req{policy: `false`}, want: []string{"false is not a policy"}},
		{name: "number", req: req{policy: `7`}, want: []string{"must be a policy name, a list of names or true"}},
		{name: "object", req: req{policy: `{"name":"random"}`}, want: []string{"must be a policy name"}},
		{name: "bad json", req: req{policy: `"random`}, want: []string{"not valid JSON"}},
		{name: "empty name", req: req{policy: `""`}, want: []string{"is empty"}},
		{name: "groups out of range", req: req{policy: `"cluster_route[groups=65]"`}, want: []string{"groups=65 is not a whole number in [1, 64]"}},
		{name: "groups not a number", req: req{policy: `"cluster_route[groups=many]"`}, want: []string{"groups=many"}},
		{name: "unknown parameter", req: req{policy: `"cluster_route[k=3]"`}, want: []string{`has no parameter "k"`, "groups"}},
		{name: "parameter on random", req: req{policy: `"random[groups=2]"`}, want: []string{"takes no parameters"}},
		{name: "parameter twice", req: req{policy: `"cluster_route[groups=2,groups=3]"`}, want: []string{"sets groups twice"}},
		{name: "malformed brackets", req: req{policy: `"cluster_route[groups=2]x"`}, want: []string{"one bracket at the end"}},
		{name: "not key=value", req: req{policy: `"cluster_route[2]"`}, want: []string{"not key=value"}},
		{name: "bad holdout parameter", req: req{policy: `"holdout_gate[holdout=head]"`}, want: []string{`holdout=head is not "random" or "tail"`}},
		{name: "holdout on a single policy", req: req{policy: `"cluster_route"`, holdout: strPtr("tail")}, want: []string{"large_context_holdout applies to a list"}},
		{name: "bad holdout", req: req{policy: `["random"]`, holdout: strPtr("middle")}, want: []string{`large_context_holdout "middle"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.parse()
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func TestParseIsParseRequest(t *testing.T) {
	c, err := Parse(json.RawMessage(`"cluster_route_g4"`), i64(1000), i64(7))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.String() != "cluster_route_g4" || c.Policy.Groups != 4 || c.Threshold != 1000 || c.Seed != 7 {
		t.Errorf("got %+v (policy %+v)", c, *c.Policy)
	}
	if c.threshold() != 1000 || (Config{}).threshold() != DefaultThreshold || (Config{}).window() != DefaultWindow {
		t.Error("defaults not applied")
	}
}

func TestValidateHandBuilt(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative threshold", Config{Threshold: -1}, "large_context_threshold -1"},
		{"negative window", Config{Window: -5}, "window -5"},
		{"negative parallel", Config{Parallel: -1}, "parallel -1"},
		{"unknown name", Config{Policy: &Policy{Name: "nope"}}, `unknown policy "nope"`},
		{"zero groups", Config{Policy: &Policy{Name: ClusterRoute}}, "groups 0"},
		{"gate without candidates", Config{Policy: &Policy{Name: HoldoutGate, Holdout: HoldoutRandom}}, "1 to 8 candidates"},
		{"gate without holdout", Config{Policy: &Policy{Name: HoldoutGate, Candidates: []Policy{{Name: Random}}}}, `holdout ""`},
		{"nested gate", Config{Policy: &Policy{Name: HoldoutGate, Holdout: HoldoutTail, Candidates: []Policy{defaultGate()}}}, "cannot be a gate's candidate"},
		{"random with groups", Config{Policy: &Policy{Name: Random, Groups: 3}}, "takes no groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}
