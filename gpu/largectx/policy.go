package largectx

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Policy names.
const (
	// Random is one seeded window of context rows, shared by every query:
	// one internal call.
	Random = "random"
	// ClusterRoute clusters the context (seeded k-means on the standardised
	// features) and routes each query to a window drawn from its cluster:
	// one internal call per cluster that receives queries. The default.
	ClusterRoute = "cluster_route"
	// ClusterRouteG4 is ClusterRoute with 4 clusters: coarser routing, at
	// most 4 calls.
	ClusterRouteG4 = "cluster_route_g4"
	// HoldoutGate scores candidate policies on a slice held out of the
	// context and deploys the best. As a name it gates among random and
	// cluster_route; a list of names gates among them.
	HoldoutGate = "holdout_gate"
)

// Holdout strategies of a gate.
const (
	// HoldoutRandom holds out a seeded random slice: for rows in no
	// particular order.
	HoldoutRandom = "random"
	// HoldoutTail holds out the last rows: for rows in time order, so that
	// no candidate's context holds rows later than the ones it is scored on.
	HoldoutTail = "tail"
)

// Bounds of a policy.
const (
	// DefaultGroups is cluster_route's cluster count.
	DefaultGroups = 8
	// MaxGroups bounds a cluster_route[groups=N], and so its calls.
	MaxGroups = 64
	// MaxCandidates bounds a gate's list, as the vendor's does.
	MaxCandidates = 8
)

// knownNames lists the policy names, as error messages give them.
const knownNames = Random + ", " + ClusterRoute + ", " + ClusterRouteG4 + ", " + HoldoutGate

// Policy is one resolved large_context_policy: a single policy, or a gate
// among candidates. Build it with Parse or ParsePolicy; the zero Policy is
// not valid.
type Policy struct {
	// Name is Random, ClusterRoute, ClusterRouteG4 or HoldoutGate.
	Name string
	// Groups is the cluster count of ClusterRoute (default 8) and
	// ClusterRouteG4 (default 4), in [1, MaxGroups]; 0 otherwise.
	Groups int
	// Candidates are a gate's policies, none of them a gate, at most
	// MaxCandidates; nil otherwise.
	Candidates []Policy
	// Holdout is a gate's holdout strategy, HoldoutRandom or HoldoutTail;
	// "" otherwise.
	Holdout string
}

// IsGate reports whether p picks among candidates.
func (p Policy) IsGate() bool { return p.Name == HoldoutGate }

// String is the policy as the report names it: the name, its parameters
// when they differ from the name's defaults, and a gate as
// gate[candidate,…] (the vendor's label).
func (p Policy) String() string {
	switch p.Name {
	case ClusterRoute, ClusterRouteG4:
		if p.Groups != defaultGroups(p.Name) {
			return fmt.Sprintf("%s[groups=%d]", p.Name, p.Groups)
		}
	case HoldoutGate:
		labels := make([]string, len(p.Candidates))
		for i, c := range p.Candidates {
			labels[i] = c.String()
		}
		return "gate[" + strings.Join(labels, ",") + "]"
	}
	return p.Name
}

func defaultGroups(name string) int {
	if name == ClusterRouteG4 {
		return 4
	}
	return DefaultGroups
}

// defaultGate is what the name holdout_gate alone gates among.
func defaultGate() Policy {
	return Policy{Name: HoldoutGate, Holdout: HoldoutRandom, Candidates: []Policy{
		{Name: Random}, {Name: ClusterRoute, Groups: DefaultGroups},
	}}
}

// ParsePolicy parses one policy name with optional parameters in brackets:
// "random", "cluster_route", "cluster_route[groups=16]",
// "cluster_route_g4", "holdout_gate", "holdout_gate[holdout=tail]".
func ParsePolicy(spec string) (Policy, error) {
	text := strings.TrimSpace(spec)
	name, params, err := splitParams(text)
	if err != nil {
		return Policy{}, err
	}
	var p Policy
	var known []string
	switch name {
	case Random:
	case ClusterRoute, ClusterRouteG4:
		p = Policy{Name: name, Groups: defaultGroups(name)}
		known = []string{"groups"}
	case HoldoutGate:
		p = defaultGate()
		known = []string{"holdout"}
	case "":
		return Policy{}, fmt.Errorf("policy name %q is empty; known policies: %s", spec, knownNames)
	default:
		return Policy{}, fmt.Errorf("unknown policy %q; known policies: %s", name, knownNames)
	}
	p.Name = name
	for _, kv := range params {
		switch {
		case !slices.Contains(known, kv[0]):
			if len(known) == 0 {
				return Policy{}, fmt.Errorf("policy %s takes no parameters, got %q", name, kv[0])
			}
			return Policy{}, fmt.Errorf("policy %s has no parameter %q; it takes %s", name, kv[0], strings.Join(known, ", "))
		case kv[0] == "groups":
			g, err := strconv.Atoi(kv[1])
			if err != nil || g < 1 || g > MaxGroups {
				return Policy{}, fmt.Errorf("policy %s: groups=%s is not a whole number in [1, %d]", name, kv[1], MaxGroups)
			}
			p.Groups = g
		case kv[0] == "holdout":
			if kv[1] != HoldoutRandom && kv[1] != HoldoutTail {
				return Policy{}, fmt.Errorf("policy %s: holdout=%s is not %q or %q", name, kv[1], HoldoutRandom, HoldoutTail)
			}
			p.Holdout = kv[1]
		}
	}
	return p, nil
}

// splitParams splits "name[k=v,k=v]" into the name and its key/value pairs.
func splitParams(text string) (string, [][2]string, error) {
	open := strings.IndexByte(text, '[')
	if open < 0 {
		if strings.ContainsRune(text, ']') {
			return "", nil, fmt.Errorf("policy %q has a ']' without '['", text)
		}
		return text, nil, nil
	}
	if !strings.HasSuffix(text, "]") || strings.Count(text, "[") != 1 || strings.Count(text, "]") != 1 {
		return "", nil, fmt.Errorf("policy %q: parameters go in one bracket at the end, as in cluster_route[groups=16]", text)
	}
	name := strings.TrimSpace(text[:open])
	var params [][2]string
	seen := map[string]bool{}
	for item := range strings.SplitSeq(text[open+1:len(text)-1], ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return "", nil, fmt.Errorf("policy %q: parameter %q is not key=value", text, item)
		}
		if seen[k] {
			return "", nil, fmt.Errorf("policy %q sets %s twice", text, k)
		}
		seen[k] = true
		params = append(params, [2]string{k, v})
	}
	return name, params, nil
}

// gateOf turns a list of policy names into a gate among them.
func gateOf(specs []string) (Policy, error) {
	if len(specs) == 0 {
		return Policy{}, fmt.Errorf("an empty list selects no policy; send a name, a list of names, or leave large_context_policy out")
	}
	if len(specs) > MaxCandidates {
		return Policy{}, fmt.Errorf("a list of %d policies is more than the %d a gate takes", len(specs), MaxCandidates)
	}
	g := Policy{Name: HoldoutGate, Holdout: HoldoutRandom}
	for _, s := range specs {
		c, err := ParsePolicy(s)
		if err != nil {
			return Policy{}, err
		}
		if c.IsGate() {
			return Policy{}, fmt.Errorf("a list is already a holdout gate; %q cannot be one of its candidates", s)
		}
		g.Candidates = append(g.Candidates, c)
	}
	return g, nil
}
