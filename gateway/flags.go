package gateway

import "flag"

// RegisterFlags registers the gateway's limits on fs, each defaulting to
// the package's default, and returns the flags' names.
func (c *Config) RegisterFlags(fs *flag.FlagSet) []string {
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "gateway: largest /predict body in bytes; larger gets 413")
	fs.Float64Var(&c.RatePerMinute, "rate-per-minute", DefaultRatePerMinute, "gateway: requests per minute allowed per key; more gets 429 with Retry-After")
	fs.IntVar(&c.RateBurst, "rate-burst", DefaultRateBurst, "gateway: requests a key may send back to back before the rate applies")
	fs.IntVar(&c.MaxConcurrent, "max-concurrent", 2, "gateway: predictions computed at once")
	fs.IntVar(&c.MaxQueue, "max-queue", 8, "gateway: requests that may wait for a prediction slot; more get 503 with Retry-After")
	fs.IntVar(&c.MaxRows, "max-rows", DefaultMaxRows, "gateway: most rows of X_train, and of X_test, per request; more gets 413")
	fs.IntVar(&c.MaxColumns, "max-columns", DefaultMaxColumns, "gateway: most features per row; more gets 413")
	fs.Int64Var(&c.MaxCells, "max-cells", DefaultMaxCells, "gateway: most values (X_train, X_test, y_train) per request, 8 bytes each once decoded; more gets 413")
	fs.Int64Var(&c.MaxKeyCells, "max-key-cells", 2*DefaultMaxCells, "gateway: most values one key's requests may hold at once; more gets 429 with Retry-After")
	fs.Func("model-alias", "gateway: name=slug, another name /predict accepts for a built-in model (repeatable; replaces the default vendor aliases, see 'regressd models')", func(v string) error {
		name, slug, err := ParseModelAlias(v)
		if err != nil {
			return err
		}
		if c.ModelAliases == nil {
			c.ModelAliases = map[string]string{}
		}
		c.ModelAliases[name] = slug
		return nil
	})
	return []string{"max-body-bytes", "rate-per-minute", "rate-burst", "max-concurrent", "max-queue", "max-rows", "max-columns", "max-cells", "max-key-cells", "model-alias"}
}
