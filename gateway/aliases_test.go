package gateway

import (
	"strings"
	"testing"
)

// TestModelAliasesConfigurable: the default table, an operator's own, and
// none at all; a bad table is refused when the server is configured.
func TestModelAliasesConfigurable(t *testing.T) {
	resolve := func(aliases map[string]string, name string) (string, bool) {
		cfg := Config{ModelAliases: aliases}
		cfg.setDefaults()
		return (&Server{cfg: cfg}).resolveModel(name)
	}
	if slug, ok := resolve(nil, "synthefy/nori-30m"); !ok || slug != "regressd/model-4l" {
		t.Errorf("default table: %q %v", slug, ok)
	}
	if slug, ok := resolve(nil, "regressd/model-2l"); !ok || slug != "regressd/model-2l" {
		t.Errorf("a built-in slug: %q %v", slug, ok)
	}
	own := map[string]string{"fast": "regressd/model-2l"}
	if slug, ok := resolve(own, "fast"); !ok || slug != "regressd/model-2l" {
		t.Errorf("operator's alias: %q %v", slug, ok)
	}
	if _, ok := resolve(own, "nori-30m"); ok {
		t.Error("an operator's table replaces the default one")
	}
	if _, ok := resolve(map[string]string{}, "nori-6m"); ok {
		t.Error("an empty table has no aliases")
	}
	for _, bad := range []map[string]string{{"x": "acme/none"}, {"regressd/model-2l": "regressd/model-4l"}} {
		cfg := Config{ModelAliases: bad}
		cfg.setDefaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "model alias") {
			t.Errorf("%v: %v, want an error", bad, err)
		}
	}
	if _, _, err := ParseModelAlias("fast=acme/none"); err == nil {
		t.Error("ParseModelAlias accepted an unknown slug")
	}
	if n, s, err := ParseModelAlias(" fast = regressd/model-2l "); err != nil || n != "fast" || s != "regressd/model-2l" {
		t.Errorf("ParseModelAlias: %q %q %v", n, s, err)
	}
}
