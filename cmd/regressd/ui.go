package main

import (
	"net/http"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/ui"
)

// mountUI serves the status page beside the scheduler's admin API, under
// the same access rule. Without a database it still lists triggers, dead
// letters and breakers, and says runs and charts are unavailable.
func mountUI(mux *http.ServeMux, s *scheduler.Scheduler, st *stack) error {
	var db *tsdb.DB
	if st.pool != nil {
		db = tsdb.New(st.pool)
	}
	u, err := ui.New(ui.Config{Triggers: s.Store(), JS: st.js, DB: db, Authorize: s.Authorize, Logger: st.log.With("role", "ui")})
	if err != nil {
		return err
	}
	u.Routes(mux)
	return nil
}
