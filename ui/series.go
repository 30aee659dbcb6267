package ui

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// defaultSeriesRows caps each read of a chart when the trigger's
// max_read_rows does not say.
const defaultSeriesRows = 50000

// Where a chart's window came from.
const (
	windowRequest = "request"  // ?start= / ?end=
	windowLastRun = "last_run" // the window the trigger's newest run read
	windowTrigger = "trigger"  // the trigger's window argument, ending now
)

// seriesResponse is GET /api/v3/triggers/{name}/series.
type seriesResponse struct {
	Trigger     string            `json:"trigger"`
	Measurement string            `json:"measurement"`
	Target      string            `json:"target"`
	Tags        map[string]string `json:"tags"`
	Start       time.Time         `json:"window_start"`
	End         time.Time         `json:"window_end"`
	// WindowFrom is request, last_run or trigger.
	WindowFrom string `json:"window_from"`
	// LastRun is the newest run's task id, when the window is its.
	LastRun string `json:"last_run,omitempty"`
	// Limit is the most rows each of observed and filled holds (the
	// newest are kept); the *_truncated flags say a read was cut.
	Limit             int                     `json:"limit"`
	Intervals         bool                    `json:"intervals"`
	Observed          []schemas.ObservedPoint `json:"observed"`
	Filled            []schemas.FilledPoint   `json:"filled"`
	ObservedTruncated bool                    `json:"observed_truncated"`
	FilledTruncated   bool                    `json:"filled_truncated"`
}

// handleSeries answers a trigger's series over a window: the target as
// observed and the points regressd filled. The measurement, target and
// series come from the trigger's arguments; what a request trigger leaves
// to the body comes from its newest run (measurement, target) or ?tags=.
func (u *UI) handleSeries(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	t, err := u.cfg.Triggers.Get(ctx, r.PathValue("name"))
	if errors.Is(err, scheduler.ErrTriggerNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "cannot read triggers: "+err.Error())
		return
	}
	if u.cfg.DB == nil {
		writeError(w, http.StatusServiceUnavailable, noLedger)
		return
	}
	// Stored triggers were validated; what does not resolve is left empty.
	args, _ := scheduler.ResolveArgs(t.Args, true, nil)
	q := r.URL.Query()
	if s := q.Get("tags"); s != "" {
		if args.Tags, err = scheduler.ParseTags(s); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	start, err := queryTime(q.Get("start"), "start")
	if err != nil {
		u.fail(w, t.Name, err)
		return
	}
	end, err := queryTime(q.Get("end"), "end")
	if err != nil {
		u.fail(w, t.Name, err)
		return
	}
	resp := seriesResponse{Trigger: t.Name, Measurement: args.Measurement, Target: args.Field, Start: start, End: end}
	if err := u.series(r, t.Name, args, &resp); err != nil {
		u.fail(w, t.Name, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// fail answers a refusal with its status, anything else as the database's
// trouble.
func (u *UI) fail(w http.ResponseWriter, trigger string, err error) {
	var he httpError
	if errors.As(err, &he) {
		writeError(w, he.status, he.Error())
		return
	}
	u.log.Error("read series", "trigger", trigger, "err", err)
	writeError(w, http.StatusServiceUnavailable, "cannot read the series: "+err.Error())
}

// series fills resp: it settles the window and the columns, then reads.
func (u *UI) series(r *http.Request, trigger string, args schemas.RunArgs, resp *seriesResponse) error {
	ctx := r.Context()
	runs, err := u.cfg.DB.Runs(ctx, trigger, 1)
	if err != nil {
		return err
	}
	if len(runs) == 1 {
		if resp.Measurement == "" {
			resp.Measurement = runs[0].Measurement
		}
		if resp.Target == "" {
			resp.Target = runs[0].Target
		}
	}
	if resp.Measurement == "" || resp.Target == "" {
		return httpError{http.StatusConflict, "the trigger leaves measurement or field to the request body and has no run yet: there is no series to show"}
	}
	switch {
	case !resp.Start.IsZero() || !resp.End.IsZero():
		resp.WindowFrom = windowRequest
		window := time.Duration(args.Window)
		if window <= 0 {
			window = 30 * 24 * time.Hour
		}
		if resp.End.IsZero() {
			resp.End = time.Now().UTC()
			if resp.Start.IsZero() {
				resp.Start = resp.End.Add(-window)
			}
		}
		if resp.Start.IsZero() {
			resp.Start = resp.End.Add(-window)
		}
	case len(runs) == 1:
		resp.WindowFrom, resp.LastRun = windowLastRun, runs[0].TaskID
		resp.Start, resp.End = runs[0].Start, runs[0].End
	default:
		resp.WindowFrom = windowTrigger
		resp.End = time.Now().UTC()
		resp.Start = resp.End.Add(-time.Duration(args.Window))
	}
	if !resp.Start.Before(resp.End) {
		return httpError{http.StatusBadRequest, fmt.Sprintf("start %s is not before end %s", resp.Start.Format(time.RFC3339), resp.End.Format(time.RFC3339))}
	}
	resp.Limit = args.MaxReadRows
	if resp.Limit <= 0 {
		resp.Limit = defaultSeriesRows
	}
	v, err := u.cfg.DB.ReadSeries(ctx, tsdb.SeriesQuery{Measurement: resp.Measurement, Target: resp.Target,
		Filter: args.Tags, Start: resp.Start, End: resp.End, Limit: resp.Limit})
	switch {
	case errors.Is(err, tsdb.ErrManySeries):
		return httpError{http.StatusConflict, err.Error() + " (?tags=k:v on this endpoint)"}
	case errors.Is(err, tsdb.ErrNoTable), errors.Is(err, tsdb.ErrNoColumn):
		return httpError{http.StatusNotFound, err.Error()}
	case err != nil:
		return err
	}
	resp.Tags, resp.Intervals = v.Tags, v.Intervals
	resp.Observed, resp.Filled = v.Observed, v.Filled
	resp.ObservedTruncated, resp.FilledTruncated = v.ObservedTruncated, v.FilledTruncated
	if resp.Observed == nil {
		resp.Observed = []schemas.ObservedPoint{}
	}
	if resp.Filled == nil {
		resp.Filled = []schemas.FilledPoint{}
	}
	return nil
}

// httpError is a refusal with its status.
type httpError struct {
	status int
	msg    string
}

func (e httpError) Error() string { return e.msg }

// queryTime parses an ISO 8601 time or date; empty is the zero time.
func queryTime(s, what string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, httpError{http.StatusBadRequest, fmt.Sprintf("%s: %q is not an ISO 8601 time (e.g. 2026-01-02T15:04:05Z)", what, s)}
}
