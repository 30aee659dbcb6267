package pipeline

import (
	"log/slog"
	"net/http"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/ui"
)

// mountUI serves the status page beside the scheduler's admin API, under
// the same access rule. Without a database it still lists triggers, dead
// letters and breakers, and says runs and charts are unavailable.
func (p *Pipeline) mountUI(mux *http.ServeMux, s *scheduler.Scheduler, log *slog.Logger) error {
	var db *tsdb.DB
	if p.Pool != nil {
		db = tsdb.New(p.Pool)
	}
	u, err := ui.New(ui.Config{Triggers: s.Store(), JS: p.JS, DB: db, Authorize: s.Authorize, Logger: log.With("role", "ui")})
	if err != nil {
		return err
	}
	u.Routes(mux)
	return nil
}
