package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/metrics"
)

// Config configures the /predict server. The zero value is valid: every
// field has a default, applied by NewServer.
type Config struct {
	// Metrics records the engine's fits, predictions, calls in flight and
	// KV-cache rung; nil records nothing.
	Metrics *metrics.Metrics

	// MaxBodyBytes is the largest request body accepted, in bytes; a larger
	// body gets 413. Default 25 MB (25,000,000), the hosted service's cap.
	MaxBodyBytes int64

	// RatePerMinute is the sustained number of requests per minute allowed
	// per key; past it a request gets 429 with Retry-After. Default 50, the
	// hosted service's documented rate.
	RatePerMinute float64
	// RateBurst is how many requests a key may send back to back before
	// RatePerMinute paces it. Default 10.
	RateBurst int

	// MaxConcurrent is the number of predictions computed at once. Default 2.
	MaxConcurrent int
	// MaxQueue is how many requests may wait for a prediction slot; one more
	// gets 503 with Retry-After. Default 4 × MaxConcurrent.
	MaxQueue int
	// QueueTimeout is the longest a request waits for a slot before 503 with
	// Retry-After. Default 60 s.
	QueueTimeout time.Duration

	// DeviceMemoryBytes is the device memory the engine and the GPU budgets
	// use, in bytes (the --device-memory flag). Default
	// gpu.DefaultDeviceMemoryBytes (24 GiB), as the vendor assumes when the
	// card is unknown.
	DeviceMemoryBytes int64
	// HostMemoryBytes is the host RAM the host budgets apply to, in bytes.
	// Default gpu.HostMemoryBytes() (the smaller of RAM and the cgroup
	// limit); when that is unknown, fractional host budgets are 0.
	HostMemoryBytes int64
	// MaxHostBudgetBytes is the most host RAM one request's offloaded cache
	// may claim, in bytes; larger host budgets are capped and listed in the
	// memory report's `clamped`. Default HostMemoryBytes / 4 (the default
	// policy's share, so a default request is never clamped); negative
	// means no cap. With many predictions in flight, set it lower.
	MaxHostBudgetBytes int64

	// MaxRows is the most rows X_train, and separately X_test, may have;
	// more gets 413 as soon as the row is read. Default 1,000,000.
	MaxRows int
	// MaxColumns is the most features a row may have. Default 2,000.
	MaxColumns int
	// MaxCells is the most values one request may carry (X_train, X_test
	// and y_train together); decoded as float64 they take 8 bytes each, so
	// the default 8,000,000 bounds a request's matrices at 64 MB.
	MaxCells int64
	// MaxKeyCells is the most cells one key's requests may hold at once
	// (decoded and not yet answered); past it a request gets 429 with
	// Retry-After. Default 2 × MaxCells.
	MaxKeyCells int64

	// LargeContextWindow is the most context rows one internal engine
	// call takes under a large_context_policy. Default 0:
	// largectx.DefaultWindow (2,048).
	LargeContextWindow int

	// ModelAliases maps other names of a model (the vendor's slugs and
	// the official client's short forms) to built-in slugs. Nil means
	// DefaultModelAliases(); an empty, non-nil map means none.
	ModelAliases map[string]string

	// DefaultModel is the model slug used when a request names none. Default
	// "" (the request must name one, as the hosted service requires).
	DefaultModel string
}

// Defaults of Config, exported for flag help texts.
const (
	DefaultMaxBodyBytes  int64   = 25_000_000
	DefaultRatePerMinute float64 = 50
	DefaultRateBurst             = 10
	DefaultMaxConcurrent         = 2
	DefaultQueueTimeout          = 60 * time.Second
	DefaultMaxRows               = 1_000_000
	DefaultMaxColumns            = 2_000
	DefaultMaxCells      int64   = 8_000_000
)

func (c *Config) setDefaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RatePerMinute == 0 {
		c.RatePerMinute = DefaultRatePerMinute
	}
	if c.RateBurst == 0 {
		c.RateBurst = DefaultRateBurst
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 4 * c.MaxConcurrent
	}
	if c.QueueTimeout == 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	if c.MaxRows == 0 {
		c.MaxRows = DefaultMaxRows
	}
	if c.MaxColumns == 0 {
		c.MaxColumns = DefaultMaxColumns
	}
	if c.MaxCells == 0 {
		c.MaxCells = DefaultMaxCells
	}
	if c.MaxKeyCells == 0 {
		c.MaxKeyCells = 2 * c.MaxCells
	}
	if c.ModelAliases == nil {
		c.ModelAliases = DefaultModelAliases()
	}
	if c.DeviceMemoryBytes == 0 {
		c.DeviceMemoryBytes = gpu.DefaultDeviceMemoryBytes
	}
	if c.HostMemoryBytes == 0 {
		c.HostMemoryBytes = gpu.HostMemoryBytes()
	}
	if c.MaxHostBudgetBytes == 0 {
		c.MaxHostBudgetBytes = c.HostMemoryBytes / 4
	}
}

// Check is Validate after defaults, on a copy: what NewServer would refuse,
// for a caller that wants to know before it starts anything else.
func (c Config) Check() error {
	c.setDefaults()
	return c.Validate()
}

// Validate reports every problem with c at once. Call it after defaults are
// applied (NewServer does both).
func (c *Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("max body bytes %d: must be positive", c.MaxBodyBytes))
	}
	if !(c.RatePerMinute > 0) {
		errs = append(errs, fmt.Errorf("rate per minute %v: must be positive", c.RatePerMinute))
	}
	if c.RateBurst < 1 {
		errs = append(errs, fmt.Errorf("rate burst %d: must be at least 1", c.RateBurst))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max concurrent %d: must be at least 1", c.MaxConcurrent))
	}
	if c.MaxQueue < 0 {
		errs = append(errs, fmt.Errorf("max queue %d: must not be negative", c.MaxQueue))
	}
	if c.QueueTimeout < 0 {
		errs = append(errs, fmt.Errorf("queue timeout %v: must not be negative", c.QueueTimeout))
	}
	if c.DeviceMemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("device memory %d bytes: must not be negative", c.DeviceMemoryBytes))
	}
	if c.HostMemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("host memory %d bytes: must not be negative", c.HostMemoryBytes))
	}
	if c.MaxRows < 1 || c.MaxColumns < 1 || c.MaxCells < 1 || c.MaxKeyCells < c.MaxCells {
		errs = append(errs, fmt.Errorf("max rows %d, columns %d, cells %d: must be positive, and max key cells %d at least max cells",
			c.MaxRows, c.MaxColumns, c.MaxCells, c.MaxKeyCells))
	}
	if c.LargeContextWindow < 0 {
		errs = append(errs, fmt.Errorf("large context window %d: must not be negative", c.LargeContextWindow))
	}
	for alias, slug := range c.ModelAliases {
		if _, ok := gpu.LookupModel(slug); !ok {
			errs = append(errs, fmt.Errorf("model alias %q: %q is not a built-in model (see regressd models)", alias, slug))
		}
		if _, ok := gpu.LookupModel(alias); ok {
			errs = append(errs, fmt.Errorf("model alias %q: a built-in model has that name", alias))
		}
	}
	if c.DefaultModel != "" {
		if _, ok := gpu.LookupModel(c.DefaultModel); !ok {
			errs = append(errs, fmt.Errorf("default model %q: not a built-in model (see regressd models)", c.DefaultModel))
		}
	}
	return errors.Join(errs...)
}
