package gpu

import "testing"

// Every vendor alias names a built-in model, and resolves to it; a
// built-in slug resolves to itself, anything else to nothing.
func TestResolveModel(t *testing.T) {
	for alias, want := range VendorAliases() {
		if _, ok := LookupModel(want); !ok {
			t.Errorf("alias %s: %s is not built in", alias, want)
		}
		if got, ok := ResolveModel(alias); !ok || got != want {
			t.Errorf("ResolveModel(%q) = %q, %v, want %q", alias, got, ok, want)
		}
	}
	for _, m := range Models() {
		if got, ok := ResolveModel(m.Slug); !ok || got != m.Slug {
			t.Errorf("ResolveModel(%q) = %q, %v", m.Slug, got, ok)
		}
	}
	if got, ok := ResolveModel("synthefy/nori"); ok {
		t.Errorf("a retired slug resolved to %q", got)
	}
}
