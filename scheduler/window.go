package scheduler

import (
	"fmt"
	"time"
)

// ResolveWindow applies the window rules: start and end as given; start alone
// → [start, now); end alone → [end−window, end); neither → [now−window, now).
// "now" is the fire time of a scheduled run, in UTC.
func ResolveWindow(start, end *time.Time, window time.Duration, now time.Time) (time.Time, time.Time, error) {
	now = now.UTC()
	var s, e time.Time
	switch {
	case start != nil && end != nil:
		s, e = start.UTC(), end.UTC()
	case start != nil:
		s, e = start.UTC(), now
	case end != nil:
		e = end.UTC()
		s = e.Add(-window)
	default:
		s, e = now.Add(-window), now
	}
	if !s.Before(e) {
		return s, e, fmt.Errorf("start_time %s is not before end_time %s", s.Format(time.RFC3339), e.Format(time.RFC3339))
	}
	return s, e, nil
}
