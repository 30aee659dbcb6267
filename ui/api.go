package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// Run list sizes.
const (
	recentRuns   = 20   // runs GET /api/v3/status lists
	defaultRuns  = 50   // runs GET /api/v3/runs lists without ?limit
	maxRunsLimit = 1000 // largest ?limit
)

// noLedger says why runs and charts are missing on a process without a
// database.
const noLedger = "this regressd has no database (a scheduler started alone without --database-url): runs and charts are not available here"

// statusResponse is GET /api/v3/status.
type statusResponse struct {
	Generated   time.Time       `json:"generated"`
	Triggers    []triggerStatus `json:"triggers"`
	RecentRuns  []schemas.Run   `json:"recent_runs"`
	Ledger      availability    `json:"ledger"`
	DeadLetters deadLetters     `json:"dead_letters"`
	Breaker     breakerStatus   `json:"breaker"`
}

// triggerStatus is a trigger with its newest run (null before its first
// run reaches the ledger).
type triggerStatus struct {
	Name    string            `json:"trigger_name"`
	Spec    string            `json:"trigger_specification"`
	Args    map[string]string `json:"trigger_arguments"`
	Enabled bool              `json:"enabled"`
	LastRun *schemas.Run      `json:"last_run"`
}

// availability says whether a source of facts could be read, and if not why.
type availability struct {
	Available bool   `json:"available"`
	Message   string `json:"message,omitempty"`
}

func (u *UI) handleStatus(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ts, err := u.cfg.Triggers.List(ctx)
	if err != nil {
		u.log.Error("status page: list triggers", "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot read triggers: "+err.Error())
		return
	}
	resp := statusResponse{Generated: time.Now().UTC(), Triggers: []triggerStatus{}, RecentRuns: []schemas.Run{},
		Ledger: availability{Available: true}}
	last := map[string]schemas.Run{}
	if u.cfg.DB == nil {
		resp.Ledger = availability{Message: noLedger}
	} else {
		runs, err := u.cfg.DB.Runs(ctx, "", recentRuns)
		if err == nil {
			resp.RecentRuns = runs
			last, err = u.cfg.DB.LastRuns(ctx)
		}
		if err != nil {
			u.log.Warn("status page: read ledger", "err", err)
			resp.Ledger = availability{Message: "cannot read the task ledger: " + err.Error()}
		}
	}
	for _, t := range ts {
		st := triggerStatus{Name: t.Name, Spec: t.Spec, Args: t.Args, Enabled: !t.Disabled}
		if run, ok := last[t.Name]; ok {
			st.LastRun = &run
		}
		resp.Triggers = append(resp.Triggers, st)
	}
	resp.DeadLetters = u.deadLetters(ctx)
	resp.Breaker = u.breaker(ctx)
	writeJSON(w, http.StatusOK, resp)
}

// runsResponse is GET /api/v3/runs.
type runsResponse struct {
	Runs []schemas.Run `json:"runs"`
}

func (u *UI) handleRuns(w http.ResponseWriter, r *http.Request) {
	limit := defaultRuns
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRunsLimit {
			writeError(w, http.StatusBadRequest, "limit must be a whole number from 1 to "+strconv.Itoa(maxRunsLimit))
			return
		}
		limit = n
	}
	if u.cfg.DB == nil {
		writeError(w, http.StatusServiceUnavailable, noLedger)
		return
	}
	runs, err := u.cfg.DB.Runs(r.Context(), r.URL.Query().Get("trigger"), limit)
	if err != nil {
		u.log.Error("read runs", "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot read the task ledger: "+err.Error())
		return
	}
	if runs == nil {
		runs = []schemas.Run{}
	}
	writeJSON(w, http.StatusOK, runsResponse{Runs: runs})
}

// runResponse is GET /api/v3/runs/{task}.
type runResponse struct {
	Run     schemas.Run        `json:"run"`
	Batches []schemas.RunBatch `json:"batches"`
	// Series and SeriesResults are a group_by run's: its series by
	// outcome, and every one of them.
	Series        *schemas.SeriesCounts  `json:"series,omitempty"`
	SeriesResults []schemas.SeriesResult `json:"series_results,omitempty"`
}

func (u *UI) handleRun(w http.ResponseWriter, r *http.Request) {
	if u.cfg.DB == nil {
		writeError(w, http.StatusServiceUnavailable, noLedger)
		return
	}
	run, batches, err := u.cfg.DB.Run(r.Context(), r.PathValue("task"))
	switch {
	case errors.Is(err, tsdb.ErrNoRun):
		writeError(w, http.StatusNotFound, "no run "+strconv.Quote(r.PathValue("task"))+" in the task ledger (a run is there once its first batch is written, or once it ends)")
		return
	case err != nil:
		u.log.Error("read run", "task_id", r.PathValue("task"), "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot read the task ledger: "+err.Error())
		return
	}
	if batches == nil {
		batches = []schemas.RunBatch{}
	}
	resp := runResponse{Run: run, Batches: batches}
	counts, series, err := u.cfg.DB.RunSeries(r.Context(), run.TaskID)
	if err != nil {
		u.log.Error("read run's series", "task_id", run.TaskID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot read the task ledger: "+err.Error())
		return
	}
	if counts.Total > 0 {
		resp.Series, resp.SeriesResults = &counts, series
	}
	writeJSON(w, http.StatusOK, resp)
}

// writeJSON answers v; the admin API's errors are {"error": message}.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
