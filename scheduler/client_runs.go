package scheduler

import (
	"context"
	"net/http"
	"net/url"

	"github.com/regressd/regressd/schemas"
)

// RunReport is a task's report from the admin API (GET /api/v3/runs/<task>):
// its ledger row, its batches, and for a group_by run its series.
type RunReport struct {
	Run           schemas.Run            `json:"run"`
	Batches       []schemas.RunBatch     `json:"batches"`
	Series        *schemas.SeriesCounts  `json:"series,omitempty"`
	SeriesResults []schemas.SeriesResult `json:"series_results,omitempty"`
}

// Run returns a task's report.
func (c *Client) Run(ctx context.Context, taskID string) (RunReport, error) {
	var r RunReport
	err := c.call(ctx, http.MethodGet, "/api/v3/runs/"+url.PathEscape(taskID), nil, &r)
	return r, err
}
