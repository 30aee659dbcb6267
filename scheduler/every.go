package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"
)

var _ cron.Schedule = everySchedule{}

// everySchedule fires at the multiples of its interval since the Unix epoch
// (every:15m at :00, :15, :30 and :45), whenever the trigger was created or
// the scheduler started: two schedulers agree on every tick, and a tick's
// window ends when it fires. cron's @every counts from the start instead.
type everySchedule struct {
	interval time.Duration // at least 1s
}

// Next returns the first multiple of the interval after t.
func (e everySchedule) Next(t time.Time) time.Time {
	epoch := time.Unix(0, 0).UTC()
	n := t.Sub(epoch) / e.interval
	if t.Before(epoch) {
		n-- // division truncates towards zero
	}
	return epoch.Add((n + 1) * e.interval)
}
