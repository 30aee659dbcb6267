package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/regressd/regressd/gpu"
)

// DefaultModelAliases maps the hosted service's model slugs, and the
// official client's short forms of them, to the built-in models that stand
// in for them: the small base model to the fast two-layer model, the larger
// one to the four-layer model, and the thinking variant to the thinking
// model. An operator replaces the table with Config.ModelAliases
// (regressd gateway --model-alias name=slug).
func DefaultModelAliases() map[string]string {
	return map[string]string{
		"synthefy/nori-6m":                  "regressd/model-2l",
		"nori-6m":                           "regressd/model-2l",
		"synthefy/nori-30m":                 "regressd/model-4l",
		"nori-30m":                          "regressd/model-4l",
		"synthefy/nori-30m-thinking-medium": "regressd/model-4l-thinking",
		"nori-30m-thinking-medium":          "regressd/model-4l-thinking",
		"nori-30m-thinking":                 "regressd/model-4l-thinking",
	}
}

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
