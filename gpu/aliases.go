package gpu

// Other names of the built-in models: the hosted service's slugs, and the
// official client's short forms of them, that a plugin user already has
// in their triggers and requests.

// VendorAliases maps the hosted service's model slugs, and the official
// client's short forms of them, to the built-in models that stand in for
// them: the small base model to the fast two-layer model, the larger one
// to the four-layer model, and the thinking variant to the thinking model.
// A new map on every call: callers may change theirs.
func VendorAliases() map[string]string {
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

// ResolveModel returns the built-in slug a model name stands for: itself
// when built in, or what VendorAliases maps it to; ok is false otherwise.
func ResolveModel(name string) (slug string, ok bool) {
	if _, ok := LookupModel(name); ok {
		return name, true
	}
	slug, ok = VendorAliases()[name]
	return slug, ok
}
