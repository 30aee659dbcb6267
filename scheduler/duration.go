package scheduler

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/regressd/regressd/schemas"
)

// durationUnits are the single-unit forms parseDuration checks for
// overflow; a suffix that ends another (s, ms) comes after it.
var durationUnits = []struct {
	suffix string
	unit   time.Duration
}{
	{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"µs", time.Microsecond}, {"ms", time.Millisecond},
	{"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour},
}

// parseDuration is schemas.ParseDuration, saying "too large" for a duration
// past time.Duration's range, which schemas reads as negative or malformed.
func parseDuration(s string) (schemas.Duration, error) {
	d, err := schemas.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	t := strings.TrimSpace(s)
	for _, u := range durationUnits {
		n, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		if v, perr := strconv.ParseFloat(n, 64); perr == nil && v*float64(u.unit) >= math.MaxInt64 {
			return 0, fmt.Errorf("duration %q is too large (at most %dd, about 292 years)", s, math.MaxInt64/int64(24*time.Hour))
		}
		break
	}
	return 0, err
}
