package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes the trigger-argument
// form: Go durations ("15m", "300s") plus minutes as the plugin writes them
// ("15min"), days ("30d") and weeks ("2w").
type Duration time.Duration

// durationUnits are the units of a single-unit duration, for telling one
// too large for time.Duration from a malformed one; a suffix that ends
// another (s, ms) comes after it.
var durationUnits = []struct {
	suffix string
	unit   time.Duration
}{
	{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"µs", time.Microsecond}, {"ms", time.Millisecond},
	{"min", time.Minute}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour},
}

// ParseDuration parses "30d", "2w", "1h30m", "15min", "300s". Zero and
// negative durations are errors: every duration argument is a length of
// time.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	for _, u := range durationUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			if v, err := strconv.ParseFloat(n, 64); err == nil && v*float64(u.unit) >= math.MaxInt64 {
				return 0, fmt.Errorf("duration %q is too large (at most %dd, about 292 years)", s, math.MaxInt64/int64(24*time.Hour))
			}
			break
		}
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "min"); ok {
		v, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q (want e.g. 30d, 12h, 15min, 300s)", s)
		}
		d = time.Duration(v * float64(time.Minute))
	} else if n, unit := s[:len(s)-1], s[len(s)-1]; unit == 'd' || unit == 'w' {
		v, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q (want e.g. 30d, 12h, 15min, 300s)", s)
		}
		day := 24 * time.Hour
		if unit == 'w' {
			day *= 7
		}
		d = time.Duration(v * float64(day))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("bad duration %q (want e.g. 30d, 12h, 15min, 300s)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", s)
	}
	return Duration(d), nil
}

// String prints whole days as "Nd", otherwise Go's form.
func (d Duration) String() string {
	td := time.Duration(d)
	if td > 0 && td%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(td/(24*time.Hour)), 10) + "d"
	}
	return td.String()
}

// MarshalJSON writes the string form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads the string form, and "0s", which MarshalJSON writes
// for a duration left unset (a message's field with no argument behind it).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30d\"")
	}
	if s == Duration(0).String() {
		*d = 0
		return nil
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
