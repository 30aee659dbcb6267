package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/regressd/regressd/gpu"
)

// DefaultModelAliases are the vendor's slugs and the official client's
// short forms of them (gpu.VendorAliases), the table the pipeline's
// triggers resolve too. An operator replaces the gateway's with
// Config.ModelAliases (regressd gateway --model-alias name=slug).
func DefaultModelAliases() map[string]string { return gpu.VendorAliases() }

// resolveModel returns the built-in slug a request's model names: itself,
// or what an alias maps it to.
func (s *Server) resolveModel(name string) (string, bool) {
	if _, ok := gpu.LookupModel(name); ok {
		return name, true
	}
	slug, ok := s.cfg.ModelAliases[name]
	return slug, ok
}

// AliasLines lists aliases as "alias -> slug" lines, sorted, for regressd
// models.
func AliasLines(aliases map[string]string) []string {
	var out []string
	for a, slug := range aliases {
		out = append(out, fmt.Sprintf("%s -> %s", a, slug))
	}
	slices.Sort(out)
	return out
}

// ParseModelAlias reads one --model-alias value, "name=slug".
func ParseModelAlias(v string) (string, string, error) {
	name, slug, ok := strings.Cut(v, "=")
	name, slug = strings.TrimSpace(name), strings.TrimSpace(slug)
	if !ok || name == "" || slug == "" {
		return "", "", fmt.Errorf("model alias %q: want name=slug, e.g. synthefy/nori-30m=regressd/model-4l", v)
	}
	if _, known := gpu.LookupModel(slug); !known {
		return "", "", fmt.Errorf("model alias %q: %q is not a built-in model (see regressd models)", v, slug)
	}
	return name, slug, nil
}
