package scheduler

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/regressd/regressd/schemas"
)

func TestEveryAlignsToTheEpoch(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct{ spec, now, want string }{
		{"every:1m", "2026-03-01T02:06:27Z", "2026-03-01T02:07:00Z"},
		{"every:1m", "2026-03-01T02:07:00Z", "2026-03-01T02:08:00Z"}, // on a tick: the next one
		{"every:15m", "2026-03-01T02:06:27.5Z", "2026-03-01T02:15:00Z"},
		{"every:15m", "2026-03-01T23:59:59Z", "2026-03-02T00:00:00Z"},
		{"every:7s", "1970-01-01T00:00:06Z", "1970-01-01T00:00:07Z"},
		{"every:1d", "2026-03-01T02:06:27+05:00", "2026-03-01T00:00:00Z"},
		{"every:1w", "2026-03-01T12:00:00Z", "2026-03-05T00:00:00Z"}, // the epoch was a Thursday
		{"every:90m", "2026-03-01T00:00:00Z", "2026-03-01T01:30:00Z"},
		{"cron:@every 1h", "2026-03-01T02:06:27Z", "2026-03-01T03:00:00Z"},
	}
	for _, tc := range cases {
		ps, err := ParseSpec(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ps.Schedule.Next(at(tc.now)), at(tc.want); !got.Equal(want) {
			t.Errorf("%s after %s: next %s, want %s", tc.spec, tc.now, got.UTC().Format(time.RFC3339), want.Format(time.RFC3339))
		}
	}
}

// A scheduled run fires on the aligned tick, not an interval after the
// trigger was created, and its window ends at the tick.
func TestEveryFiresOnTheTick(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a tick (about 2s)")
	}
	s, _, srv := newTestScheduler(t)
	jobs := make(chan schemas.Job, 4)
	sub, err := srv.NC.Subscribe(schemas.SubjectJobs+">", func(m *nats.Msg) {
		var j schemas.Job
		if json.Unmarshal(m.Data, &j) == nil {
			jobs <- j
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Created 1.25s into a 2s interval: an unaligned schedule fires 2s
	// later, on an odd second; the aligned one 0.75s later, on the tick.
	const interval = 2 * time.Second
	now := time.Now()
	time.Sleep(now.Truncate(interval).Add(interval + 1250*time.Millisecond).Sub(now))
	args, _ := SplitArgs("measurement=m,field=y,feature_fields=a,model=v/m")
	if err := s.Store().Create(ctx, Trigger{Name: "tick", Spec: "every:2s", Args: args}); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-jobs:
		if j.End.UnixNano()%int64(interval) != 0 {
			t.Errorf("window ends at %s, not on a tick", j.End)
		}
		// Unaligned, the tick would come 1.25 s late (an interval after the create).
		if late := j.Requested.Sub(j.End); late < 0 || late > time.Second {
			t.Errorf("fired %s after its tick", late)
		}
	case <-time.After(3 * interval):
		t.Fatal("no scheduled job")
	}
}
