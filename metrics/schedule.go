package metrics

import (
	"sync"
	"time"
)

// schedules holds each scheduled trigger's last success, so a success is
// never moved back by one that finished later but started earlier.
type schedules struct {
	mu     sync.Mutex
	lastOK map[string]time.Time
}

// ScheduleTick counts a schedule tick: fired, or skipped because the
// trigger's previous run was still under way.
func (m *Metrics) ScheduleTick(skipped bool) {
	if m == nil {
		return
	}
	if skipped {
		m.scheduleSkipped.Inc()
		return
	}
	m.scheduleTicks.Inc()
}

// SetSchedule records that trigger runs every period, as loaded at since.
// Until a run succeeds its last success reads since, so a schedule that
// never succeeds is noticed two periods after it was loaded (alert
// RegressdScheduleMissed).
func (m *Metrics) SetSchedule(trigger string, period time.Duration, since time.Time) {
	if m == nil {
		return
	}
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	m.schedulePeriod.WithLabelValues(trigger).Set(period.Seconds())
	if _, ok := m.sched.lastOK[trigger]; !ok {
		m.sched.lastOK[trigger] = since
		m.scheduleSuccess.WithLabelValues(trigger).Set(unix(since))
	}
}

// ScheduleSucceeded records a scheduled run of trigger that succeeded at at.
func (m *Metrics) ScheduleSucceeded(trigger string, at time.Time) {
	if m == nil {
		return
	}
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	if last, ok := m.sched.lastOK[trigger]; ok && !at.After(last) {
		return
	}
	m.sched.lastOK[trigger] = at
	m.scheduleSuccess.WithLabelValues(trigger).Set(unix(at))
}

// ForgetSchedule drops a trigger's schedule series (deleted, disabled, or
// no longer scheduled), so it neither alerts nor lingers.
func (m *Metrics) ForgetSchedule(trigger string) {
	if m == nil {
		return
	}
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	delete(m.sched.lastOK, trigger)
	m.schedulePeriod.DeleteLabelValues(trigger)
	m.scheduleSuccess.DeleteLabelValues(trigger)
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
