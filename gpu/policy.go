package gpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// ErrInvalidPolicy is matched (errors.Is) by every error ParsePolicy and
// Policy.Validate return: unknown fields, wrong types, incoherent
// combinations, out-of-range values, a memory report passed back as a policy.
var ErrInvalidPolicy = errors.New("invalid memory_policy")

// PolicyError lists every problem found in one memory_policy, so a caller can
// fix them all in one go. It matches ErrInvalidPolicy.
type PolicyError struct {
	// Problems are short lowercase sentences, one per problem, in field order.
	Problems []string
}

func (e *PolicyError) Error() string {
	return ErrInvalidPolicy.Error() + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap makes errors.Is(err, ErrInvalidPolicy) true.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// Cache precisions accepted in Policy.CacheDType.
const (
	CacheDTypeBF16 = "bf16"
	CacheDTypeInt8 = "int8"
)

// Preset names accepted as a string memory_policy.
const (
	PresetExact      = "exact"       // allow_quantization=false
	PresetMaxContext = "max_context" // cache_dtype="int8"
	PresetOff        = "off"         // cache=false
)

// Policy is the seed's memory_policy: how the KV cache of a large context is
// held. Start from DefaultPolicy (the zero Policy is not the default: it has
// the cache off and zero budgets) or from ParsePolicy. The JSON form of a
// Policy is the full resolved policy, as the memory report carries it; use
// WireJSON for a request body.
type Policy struct {
	// Cache builds a KV cache at all. Default true.
	Cache bool `json:"cache"`
	// CacheDType is the precision the cache starts at: "bf16" or "int8".
	// Default "bf16".
	CacheDType string `json:"cache_dtype"`
	// AllowQuantization lets a bf16 cache drop to int8 when bf16 will not
	// stay within a budget. Default true.
	AllowQuantization bool `json:"allow_quantization"`
	// GPUBudgetFrac is the share of device memory the cache may occupy, in
	// (0, 1]. Default 0.4.
	GPUBudgetFrac float64 `json:"gpu_budget_frac"`
	// GPUBudgetAbsoluteGB is a hard device-memory ceiling in GiB; it
	// overrides GPUBudgetFrac. Default nil (use the fraction).
	GPUBudgetAbsoluteGB *float64 `json:"gpu_budget_absolute_gb"`
	// OffloadToHost lets the cache live in host RAM, streamed back per
	// layer, rather than give up caching. Default true.
	OffloadToHost bool `json:"offload_to_host"`
	// HostBudgetFrac is the share of host RAM offload may claim, in (0, 1].
	// Default 0.25.
	HostBudgetFrac float64 `json:"host_budget_frac"`
	// HostBudgetAbsoluteGB is a hard host-RAM ceiling in GiB; it overrides
	// HostBudgetFrac. Default nil (use the fraction).
	HostBudgetAbsoluteGB *float64 `json:"host_budget_absolute_gb"`
	// ElementsBudget caps (context + query) rows × features per forward
	// pass. Default nil: derived from device memory by the engine.
	ElementsBudget *int64 `json:"elements_budget"`
	// AdaptiveQueryChunk halves the query batch and retries on an
	// out-of-memory error. Default true.
	AdaptiveQueryChunk bool `json:"adaptive_query_chunk"`
	// ContextRowChunk is the number of context rows per chunk of a
	// row-chunked cache build, or per staged slice with StreamContext.
	// Default nil (the engine's 2048; 4096 rows per slice).
	ContextRowChunk *int `json:"context_row_chunk"`
	// AllowSubsample permits dropping context rows as a last resort. When
	// false, a context that must be shortened is ErrContextTooLarge.
	// Default true.
	AllowSubsample bool `json:"allow_subsample"`
	// StreamContext keeps the context's cache in host memory and stages
	// bounded row slices of it into device memory, one slice at a time
	// (rungs stream_bf16 and stream_int8, see stream.go); it never falls
	// back to the plain loop: when one slice does not fit, Predict fails
	// with ErrOutOfMemory. Default false.
	StreamContext bool `json:"stream_context"`

	// set records the fields the caller gave explicitly (a preset counts
	// as setting its one field), so validation and notes can tell "left at
	// its default" from "asked for".
	set policyFields
}

// policyFields is a bit set of Policy fields.
type policyFields uint16

const (
	pfCache policyFields = 1 << iota
	pfCacheDType
	pfAllowQuantization
	pfGPUBudgetFrac
	pfGPUBudgetAbsoluteGB
	pfOffloadToHost
	pfHostBudgetFrac
	pfHostBudgetAbsoluteGB
	pfElementsBudget
	pfAdaptiveQueryChunk
	pfContextRowChunk
	pfAllowSubsample
	pfStreamContext
)

// policyFieldNames maps each field bit to its JSON name, in the seed's order.
var policyFieldNames = []struct {
	bit  policyFields
	name string
}{
	{pfCache, "cache"},
	{pfCacheDType, "cache_dtype"},
	{pfAllowQuantization, "allow_quantization"},
	{pfGPUBudgetFrac, "gpu_budget_frac"},
	{pfGPUBudgetAbsoluteGB, "gpu_budget_absolute_gb"},
	{pfOffloadToHost, "offload_to_host"},
	{pfHostBudgetFrac, "host_budget_frac"},
	{pfHostBudgetAbsoluteGB, "host_budget_absolute_gb"},
	{pfElementsBudget, "elements_budget"},
	{pfAdaptiveQueryChunk, "adaptive_query_chunk"},
	{pfContextRowChunk, "context_row_chunk"},
	{pfAllowSubsample, "allow_subsample"},
	{pfStreamContext, "stream_context"},
}

// cacheOnlyFields only mean something when a cache is built; setting one with
// cache=false is an error rather than silently ignored (seed, Errors rule 3).
const cacheOnlyFields = pfCacheDType | pfAllowQuantization | pfGPUBudgetFrac |
	pfGPUBudgetAbsoluteGB | pfOffloadToHost | pfHostBudgetFrac |
	pfHostBudgetAbsoluteGB | pfContextRowChunk

// memoryReportFields are keys of a memory report that no policy has; seeing
// one means a report was passed back as a policy (seed, Errors rule 4).
var memoryReportFields = []string{
	"rung", "est_cache_gb", "resident_gb", "query_chunk",
	"dropped_context_rows", "clamped", "notes", "policy",
}

// Default values of the seed's memory policy table.
const (
	defaultGPUBudgetFrac  = 0.4
	defaultHostBudgetFrac = 0.25
)

// policyBytesPerGiB converts the policy's GiB figures to bytes.
const policyBytesPerGiB = 1 << 30

// DefaultPolicy is the policy applied when memory_policy is omitted:
// full-precision cache, int8 only if needed to stay on the GPU, at most 40%
// of device memory, offload to host RAM rather than give up, shrink the
// context only as a last resort.
func DefaultPolicy() Policy {
	return Policy{
		Cache:              true,
		CacheDType:         CacheDTypeBF16,
		AllowQuantization:  true,
		GPUBudgetFrac:      defaultGPUBudgetFrac,
		OffloadToHost:      true,
		HostBudgetFrac:     defaultHostBudgetFrac,
		AdaptiveQueryChunk: true,
		AllowSubsample:     true,
	}
}

// Presets returns the preset names accepted as a string memory_policy.
func Presets() []string { return []string{PresetExact, PresetMaxContext, PresetOff} }

// PresetPolicy returns the policy a preset name stands for.
func PresetPolicy(name string) (Policy, error) {
	p := DefaultPolicy()
	switch name {
	case PresetExact:
		p.AllowQuantization = false
		p.set = pfAllowQuantization
	case PresetMaxContext:
		p.CacheDType = CacheDTypeInt8
		p.set = pfCacheDType
	case PresetOff:
		p.Cache = false
		p.set = pfCache
	default:
		return Policy{}, &PolicyError{Problems: []string{fmt.Sprintf(
			"unknown preset %q; presets are %s, or send an object", name, strings.Join(Presets(), ", "))}}
	}
	return p, nil
}

// ParsePolicy reads a memory_policy as sent over the wire: JSON null or
// nothing (the default), a preset string, or an object with the seed's
// fields. Objects are strict: an unknown field, a wrong type or an incoherent
// combination is an error naming the field, and every problem is reported at
// once. A JSON null field value means "the default" and does not count as
// set. All errors match ErrInvalidPolicy.
func ParsePolicy(raw []byte) (Policy, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return DefaultPolicy(), nil
	}
	switch raw[0] {
	case '"':
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return Policy{}, &PolicyError{Problems: []string{"malformed preset string"}}
		}
		return PresetPolicy(name)
	case '{':
		return parsePolicyObject(raw)
	default:
		return Policy{}, &PolicyError{Problems: []string{fmt.Sprintf(
			"must be a preset string (%s) or an object, got %s", strings.Join(Presets(), ", "), JSONKind(raw))}}
	}
}

func parsePolicyObject(raw []byte) (Policy, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Policy{}, &PolicyError{Problems: []string{"malformed object: " + err.Error()}}
	}
	var reportKeys []string
	for _, k := range memoryReportFields {
		if _, ok := fields[k]; ok {
			reportKeys = append(reportKeys, k)
		}
	}
	if len(reportKeys) > 0 {
		return Policy{}, &PolicyError{Problems: []string{fmt.Sprintf(
			"a memory_report was passed back as memory_policy (it has %s); send only policy fields such as cache, cache_dtype and gpu_budget_frac",
			strings.Join(reportKeys, ", "))}}
	}

	p := DefaultPolicy()
	var problems []string
	// Walk the known fields in the seed's order so messages are stable.
	known := make(map[string]bool, len(policyFieldNames))
	for _, f := range policyFieldNames {
		known[f.name] = true
		v, ok := fields[f.name]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		if msg := p.decodeField(f.bit, f.name, v); msg != "" {
			problems = append(problems, msg)
			continue
		}
		p.set |= f.bit
	}
	var unknown []string
	for k := range fields {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		msg := fmt.Sprintf("unknown field %q", k)
		if s := suggestPolicyField(k); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		problems = append(problems, msg)
	}
	problems = append(problems, p.problems()...)
	if len(problems) > 0 {
		return Policy{}, &PolicyError{Problems: problems}
	}
	return p, nil
}

// decodeField stores one field's JSON value into p, or returns why it cannot.
func (p *Policy) decodeField(bit policyFields, name string, v json.RawMessage) string {
	wrongType := func(want string) string {
		return fmt.Sprintf("%s: want %s, got %s", name, want, JSONKind(v))
	}
	switch bit {
	case pfCache, pfAllowQuantization, pfOffloadToHost, pfAdaptiveQueryChunk, pfAllowSubsample, pfStreamContext:
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return wrongType("true or false")
		}
		switch bit {
		case pfCache:
			p.Cache = b
		case pfAllowQuantization:
			p.AllowQuantization = b
		case pfOffloadToHost:
			p.OffloadToHost = b
		case pfAdaptiveQueryChunk:
			p.AdaptiveQueryChunk = b
		case pfAllowSubsample:
			p.AllowSubsample = b
		case pfStreamContext:
			p.StreamContext = b
		}
	case pfCacheDType:
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return wrongType(`"bf16" or "int8"`)
		}
		p.CacheDType = s // checked in problems
	case pfGPUBudgetFrac, pfHostBudgetFrac, pfGPUBudgetAbsoluteGB, pfHostBudgetAbsoluteGB:
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return wrongType("a number")
		}
		switch bit {
		case pfGPUBudgetFrac:
			p.GPUBudgetFrac = f
		case pfHostBudgetFrac:
			p.HostBudgetFrac = f
		case pfGPUBudgetAbsoluteGB:
			p.GPUBudgetAbsoluteGB = &f
		case pfHostBudgetAbsoluteGB:
			p.HostBudgetAbsoluteGB = &f
		}
	case pfElementsBudget, pfContextRowChunk:
		n, ok := jsonInteger(v)
		var f float64
		if !ok && json.Unmarshal(v, &f) == nil && f == math.Trunc(f) {
			return fmt.Sprintf("%s: %s is out of range", name, bytes.TrimSpace(v))
		}
		if !ok {
			return wrongType("an integer")
		}
		if bit == pfElementsBudget {
			p.ElementsBudget = &n
		} else {
			if n > math.MaxInt32 || n < math.MinInt32 {
				return fmt.Sprintf("%s: %d is out of range", name, n)
			}
			c := int(n)
			p.ContextRowChunk = &c
		}
	}
	return ""
}

// jsonInteger accepts a JSON number with an integral value (2048, 2048.0,
// 1e6) that fits in an int64. A string is refused, even one holding a
// number, which decoding into json.Number would accept.
func jsonInteger(v json.RawMessage) (int64, bool) {
	if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '"' {
		return 0, false
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
		return 0, false
	}
	return int64(f), true
}

// JSONKind names the JSON type of v for error messages ("a string",
// "an object", ...): the engine's and the gateway's messages say it alike.
func JSONKind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// suggestPolicyField returns the known field closest to k, or "" when none
// is close: case-insensitive equality, a small edit distance, or one a
// prefix of the other (gpu_budget_fraction).
func suggestPolicyField(k string) string {
	lk := strings.ToLower(k)
	best, bestD := "", 1<<30
	for _, f := range policyFieldNames {
		if lk == f.name {
			return f.name
		}
		// Allow about one typo per five characters, at least two.
		if d := editDistance(lk, f.name); d <= max(2, len(f.name)/5) && d < bestD {
			best, bestD = f.name, d
		}
	}
	if best != "" || len(lk) < 6 {
		return best
	}
	for _, f := range policyFieldNames {
		if strings.HasPrefix(lk, f.name) || strings.HasPrefix(f.name, lk) {
			best = f.name // the longest prefix wins: cache_dtype_x → cache_dtype
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Validate reports every problem with p at once, as a *PolicyError matching
// ErrInvalidPolicy, or nil. It applies to policies built in Go as well as
// parsed ones; for a policy built in Go a field counts as set when it
// differs from its default.
func (p Policy) Validate() error {
	if probs := p.problems(); len(probs) > 0 {
		return &PolicyError{Problems: probs}
	}
	return nil
}

func (p Policy) problems() []string {
	var out []string
	if !p.Cache {
		var names []string
		for _, f := range policyFieldNames {
			if f.bit&cacheOnlyFields != 0 && p.isSet(f.bit) {
				names = append(names, f.name)
			}
			// stream_context=false asks for nothing a cache would do.
			if f.bit == pfStreamContext && p.StreamContext {
				names = append(names, f.name)
			}
		}
		if len(names) > 0 {
			out = append(out, fmt.Sprintf(
				"cache=false with cache-only field(s) %s set: without a cache they would be ignored; drop them or set cache=true",
				strings.Join(names, ", ")))
		}
	}
	switch p.CacheDType {
	case CacheDTypeBF16:
	case CacheDTypeInt8:
		if !p.AllowQuantization {
			out = append(out, `cache_dtype="int8" with allow_quantization=false: an int8 cache is quantised; use cache_dtype="bf16" (or the exact preset) to keep full precision`)
		}
	default:
		out = append(out, fmt.Sprintf(`cache_dtype: %q is not "bf16" or "int8"`, p.CacheDType))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"gpu_budget_frac", p.GPUBudgetFrac}, {"host_budget_frac", p.HostBudgetFrac}} {
		if !(f.v > 0 && f.v <= 1) {
			msg := fmt.Sprintf("%s: %v is outside (0, 1]", f.name, f.v)
			if f.v == 0 {
				msg += fmt.Sprintf("; for no budget at all set %s_absolute_gb=0", strings.TrimSuffix(f.name, "_frac"))
			}
			out = append(out, msg)
		}
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"gpu_budget_absolute_gb", p.GPUBudgetAbsoluteGB}, {"host_budget_absolute_gb", p.HostBudgetAbsoluteGB}} {
		if f.v != nil && (*f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			out = append(out, fmt.Sprintf("%s: %v is not a size in GiB (want 0 or more)", f.name, *f.v))
		}
	}
	if p.ElementsBudget != nil && *p.ElementsBudget <= 0 {
		out = append(out, fmt.Sprintf("elements_budget: %d is not a positive count", *p.ElementsBudget))
	}
	if p.ContextRowChunk != nil && *p.ContextRowChunk <= 0 {
		out = append(out, fmt.Sprintf("context_row_chunk: %d is not a positive row count", *p.ContextRowChunk))
	}
	return out
}

// IsSet reports whether the field with this JSON name was given explicitly
// (by an object or a preset) or, for a policy built in Go, differs from its
// default. Unknown names report false.
func (p Policy) IsSet(name string) bool {
	for _, f := range policyFieldNames {
		if f.name == name {
			return p.isSet(f.bit)
		}
	}
	return false
}

func (p Policy) isSet(bit policyFields) bool {
	if p.set&bit != 0 {
		return true
	}
	d := DefaultPolicy()
	switch bit {
	case pfCache:
		return p.Cache != d.Cache
	case pfCacheDType:
		return p.CacheDType != d.CacheDType
	case pfAllowQuantization:
		return p.AllowQuantization != d.AllowQuantization
	case pfGPUBudgetFrac:
		return p.GPUBudgetFrac != d.GPUBudgetFrac
	case pfGPUBudgetAbsoluteGB:
		return p.GPUBudgetAbsoluteGB != nil
	case pfOffloadToHost:
		return p.OffloadToHost != d.OffloadToHost
	case pfHostBudgetFrac:
		return p.HostBudgetFrac != d.HostBudgetFrac
	case pfHostBudgetAbsoluteGB:
		return p.HostBudgetAbsoluteGB != nil
	case pfElementsBudget:
		return p.ElementsBudget != nil
	case pfAdaptiveQueryChunk:
		return p.AdaptiveQueryChunk != d.AdaptiveQueryChunk
	case pfContextRowChunk:
		return p.ContextRowChunk != nil
	case pfAllowSubsample:
		return p.AllowSubsample != d.AllowSubsample
	case pfStreamContext:
		return p.StreamContext != d.StreamContext
	}
	return false
}

// WireJSON encodes p for a request body: an object holding only the fields
// that were set (see IsSet), so the server applies the same checks the
// caller's own ParsePolicy would. The default policy encodes as {}.
func (p Policy) WireJSON() ([]byte, error) {
	var full map[string]json.RawMessage
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &full); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage)
	for _, f := range policyFieldNames {
		if p.isSet(f.bit) {
			out[f.name] = full[f.name]
		}
	}
	return json.Marshal(out)
}

// GPUBudgetBytes is the device-memory ceiling for the cache:
// gpu_budget_absolute_gb when set, else gpu_budget_frac × deviceBytes, never
// more than the device. deviceBytes ≤ 0 means unknown and assumes
// DefaultDeviceMemoryBytes, as the vendor does.
func (p Policy) GPUBudgetBytes(deviceBytes int64) int64 {
	if deviceBytes <= 0 {
		deviceBytes = DefaultDeviceMemoryBytes
	}
	if p.GPUBudgetAbsoluteGB != nil {
		return min(gibToBytes(*p.GPUBudgetAbsoluteGB), deviceBytes)
	}
	return fracOf(p.GPUBudgetFrac, deviceBytes)
}

// HostBudgetBytes is the host-RAM ceiling for an offloaded cache: 0 when
// offload_to_host is false; host_budget_absolute_gb when set (capped to
// hostBytes when known); else host_budget_frac × hostBytes, which is 0 (no
// offload) when host RAM is unknown (hostBytes ≤ 0).
func (p Policy) HostBudgetBytes(hostBytes int64) int64 {
	if !p.OffloadToHost {
		return 0
	}
	if p.HostBudgetAbsoluteGB != nil {
		b := gibToBytes(*p.HostBudgetAbsoluteGB)
		if hostBytes > 0 {
			b = min(b, hostBytes)
		}
		return b
	}
	if hostBytes <= 0 {
		return 0
	}
	return fracOf(p.HostBudgetFrac, hostBytes)
}

// ClampHost caps the host-RAM budget at maxHostBytes, the most one request
// may claim on a shared server, and returns the capped policy and the JSON
// names of the fields it changed (the hosted memory report's `clamped`).
// hostBytes is the host RAM the fraction applies to (≤ 0: unknown).
// maxHostBytes ≤ 0 means no cap. A capped fraction keeps its form (a
// smaller fraction), so the report still reads as the caller wrote it. A
// budget that offload_to_host=false already disables is left alone.
func (p Policy) ClampHost(hostBytes, maxHostBytes int64) (Policy, []string) {
	if maxHostBytes <= 0 || !p.OffloadToHost {
		return p, nil
	}
	if p.HostBudgetAbsoluteGB != nil {
		if gibToBytes(*p.HostBudgetAbsoluteGB) <= maxHostBytes {
			return p, nil
		}
		// Round down to a readable figure that stays within the cap.
		capped := math.Floor(bytesToGiB(maxHostBytes)*1000) / 1000
		p.HostBudgetAbsoluteGB = &capped
		return p, []string{"host_budget_absolute_gb"}
	}
	if hostBytes <= 0 || fracOf(p.HostBudgetFrac, hostBytes) <= maxHostBytes {
		return p, nil
	}
	p.HostBudgetFrac = float64(maxHostBytes) / float64(hostBytes)
	return p, []string{"host_budget_frac"}
}

// Notes explains settings that are honoured but probably not what the caller
// meant (the hosted memory report's `notes`). deviceBytes and hostBytes are
// the memory the budgets apply to; ≤ 0 means unknown (the device then
// assumes DefaultDeviceMemoryBytes). Notes assumes p is valid.
func (p Policy) Notes(deviceBytes, hostBytes int64) []string {
	var notes []string
	add := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	devKnown := deviceBytes > 0
	if !devKnown {
		deviceBytes = DefaultDeviceMemoryBytes
	}

	if !p.Cache {
		return notes // Validate refuses cache-only fields here; nothing to explain.
	}
	if p.isSet(pfGPUBudgetFrac) && p.GPUBudgetAbsoluteGB != nil {
		add("gpu_budget_frac and gpu_budget_absolute_gb are both set: the absolute %.3g GiB wins and the fraction is ignored", *p.GPUBudgetAbsoluteGB)
	}
	if p.GPUBudgetAbsoluteGB != nil && gibToBytes(*p.GPUBudgetAbsoluteGB) > deviceBytes {
		add("gpu_budget_absolute_gb=%.3g is more than the device's %.3g GiB%s: the budget is the whole device", *p.GPUBudgetAbsoluteGB, bytesToGiB(deviceBytes), assumed(devKnown))
	}
	gpuBudget := p.GPUBudgetBytes(deviceBytes)
	if gpuBudget >= deviceBytes && (p.isSet(pfGPUBudgetFrac) || p.GPUBudgetAbsoluteGB != nil) {
		add("the GPU budget is the whole device: nothing is left for weights and activations, so out-of-memory retries (smaller query chunks, a row-chunked build) are likely")
	}
	hostSet := p.isSet(pfHostBudgetFrac) || p.HostBudgetAbsoluteGB != nil
	if p.StreamContext {
		also := ""
		if !p.OffloadToHost {
			also = ", whatever offload_to_host says"
		}
		add("stream_context=true: the cache stays in host memory (within the host budget%s) and every pass stages it in row slices; exact, never the plain loop, slower than a resident cache", also)
	} else if !p.OffloadToHost {
		if hostSet {
			add("host budgets are set but offload_to_host=false: they are ignored and the cache never moves to host RAM")
		}
		if gpuBudget == 0 {
			add("the GPU budget is 0 and offload_to_host=false: the cache has nowhere to live, so a multi-pass query set runs the plain loop (exact, much slower)")
		} else if !p.AllowQuantization {
			add("allow_quantization=false and offload_to_host=false: a context whose bf16 cache exceeds the GPU budget runs the plain loop (exact, much slower); offload keeps it exact and faster")
		}
		return notes
	}
	if p.isSet(pfHostBudgetFrac) && p.HostBudgetAbsoluteGB != nil {
		add("host_budget_frac and host_budget_absolute_gb are both set: the absolute %.3g GiB wins and the fraction is ignored", *p.HostBudgetAbsoluteGB)
	}
	if hostBytes > 0 && p.HostBudgetAbsoluteGB != nil && gibToBytes(*p.HostBudgetAbsoluteGB) > hostBytes {
		add("host_budget_absolute_gb=%.3g is more than the host's %.3g GiB of RAM: the budget is all of it", *p.HostBudgetAbsoluteGB, bytesToGiB(hostBytes))
	}
	hostBudget := p.HostBudgetBytes(hostBytes)
	switch {
	case p.StreamContext: // the offload notes below do not apply
	case hostBytes <= 0 && p.HostBudgetAbsoluteGB == nil:
		if p.isSet(pfOffloadToHost) || hostSet {
			add("host RAM is unknown here, so the fractional host budget is 0 and offload never happens; set host_budget_absolute_gb to offload anyway")
		}
	case hostBudget == 0:
		add("the host budget is 0: offload never happens although offload_to_host=true")
	case hostBudget <= gpuBudget && (hostSet || p.isSet(pfGPUBudgetFrac) || p.GPUBudgetAbsoluteGB != nil):
		add("the host budget (%.3g GiB) is at or below the GPU budget (%.3g GiB): any cache that fits in host RAM already fits on the GPU, so offload never helps", bytesToGiB(hostBudget), bytesToGiB(gpuBudget))
	}
	if gpuBudget == 0 && p.GPUBudgetAbsoluteGB != nil && !p.StreamContext {
		add("gpu_budget_absolute_gb=0: the cache is never resident; it is offloaded to host RAM (exact, slower) when it fits there")
	}
	if p.CacheDType == CacheDTypeInt8 && p.isSet(pfAllowQuantization) && p.AllowQuantization {
		// Redundant rather than wrong; say what int8 costs.
		add(`allow_quantization=true is redundant with cache_dtype="int8": the cache starts quantised even when bf16 would fit`)
	}
	if p.ContextRowChunk != nil && p.StreamContext {
		add("context_row_chunk=%d with stream_context: each staged slice holds that many context rows (in whole blocks of %d, at least one), within the GPU budget; the predictions do not depend on it", *p.ContextRowChunk, anchorBlock)
	}
	if p.ContextRowChunk != nil && !p.StreamContext {
		add("context_row_chunk=%d: a cache built in row chunks differs slightly from a whole build (about 4e-3 on a 512-row query set) unless one chunk holds every context row", *p.ContextRowChunk)
	}
	return notes
}

func assumed(known bool) string {
	if known {
		return ""
	}
	return " (assumed; the device size is unknown)"
}

func gibToBytes(gb float64) int64 {
	b := gb * policyBytesPerGiB
	if b >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(b)
}

func bytesToGiB(b int64) float64 { return float64(b) / policyBytesPerGiB }

func fracOf(frac float64, total int64) int64 {
	return int64(math.Floor(frac * float64(total)))
}
