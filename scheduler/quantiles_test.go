package scheduler

import (
	"strings"
	"testing"
)

func TestQuantilesArgument(t *testing.T) {
	args, err := SplitArgs(base + ",quantiles=0.9 0.1 0.025")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ResolveArgs(args, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Quantiles) != 3 || r.Quantiles[0] != 0.9 || r.Quantiles[2] != 0.025 {
		t.Fatalf("quantiles %v, want [0.9 0.1 0.025]", r.Quantiles)
	}
	if r.LargeContext != nil {
		t.Fatalf("large context %+v without large_context_* arguments", r.LargeContext)
	}
}

func TestLargeContextArguments(t *testing.T) {
	args, _ := SplitArgs(base + ",large_context_policy=random cluster_route[groups=4],large_context_threshold=20000,large_context_seed=7")
	r, err := ResolveArgs(args, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	lc := r.LargeContext
	if lc == nil || strings.Join(lc.Policy, " ") != "random cluster_route[groups=4]" || lc.Threshold != 20000 || lc.Seed == nil || *lc.Seed != 7 {
		t.Fatalf("large context %+v", lc)
	}
	if got := string(lc.PolicyJSON()); got != `["random","cluster_route[groups=4]"]` {
		t.Fatalf("policy JSON %s", got)
	}
}

func TestQuantileAndLargeContextRefusals(t *testing.T) {
	cases := []struct {
		name, args string
		want       []string
	}{
		{"level out of range", ",quantiles=0.1 1.5 0 abc", []string{`"1.5"`, `"0"`, `"abc"`, "not a level in (0, 1)"}},
		{"clash with a tag", ",tags=p10:a,quantiles=0.1 0.9", []string{`column "p10" of the level would clash with the tag "p10"`}},
		{"unknown policy", ",large_context_policy=nearest", []string{"large_context_policy", `unknown policy "nearest"`}},
		{"threshold without policy", ",large_context_threshold=100", []string{"without large_context_policy"}},
		{"bad threshold", ",large_context_policy=random,large_context_threshold=0", []string{"large_context_threshold 0 is not a row count"}},
		{"bad seed", ",large_context_policy=random,large_context_seed=x", []string{`large_context_seed: "x" is not a whole number`}},
		{"seed too large", ",large_context_policy=random,large_context_seed=99999999999", []string{"large_context_seed 99999999999 is not in"}},
	}
	for _, c := range cases {
		args, err := SplitArgs(base + c.args)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ResolveArgs(args, false, nil)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v does not contain %q", c.name, err, w)
			}
		}
	}
}

// A config file gives quantiles and a policy list as TOML lists.
func TestQuantilesFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "q.toml", `
measurement = "m"
field = "y"
feature_fields = ["a"]
model = "v/m"
quantiles = [0.1, 0.9]
large_context_policy = ["random", "cluster_route[groups=16]"]
`)
	args, _, err := ExpandArgs(map[string]string{ArgConfigFile: "q.toml"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ResolveArgs(args, false, nil)
	if err != nil || len(r.Quantiles) != 2 || r.Quantiles[1] != 0.9 || r.LargeContext == nil || len(r.LargeContext.Policy) != 2 {
		t.Fatalf("args %v: %+v, %v", args, r, err)
	}
	writeFile(t, dir, "bad.toml", `
measurement = "m"
field = "y"
feature_fields = ["a"]
model = "v/m"
quantiles = ["low"]
`)
	if _, _, err := ExpandArgs(map[string]string{ArgConfigFile: "bad.toml"}, dir); err == nil || !strings.Contains(err.Error(), `quantiles: "low" is not a level`) {
		t.Fatalf("a string level: %v", err)
	}
}
