package schemas

// Many series in one run (a trigger's group_by): the parent task and its
// series, each a task of its own.

import (
	"crypto/sha256"
	"encoding/hex"
)

// StatusSeries is the status of a parent task's announcement: a result
// (batch VerdictBatch) that tells the writer how many series the run
// split into, before any of them is written.
const StatusSeries Status = "series"

// DefaultMaxRunPredictRows is max_run_predict_rows when a trigger leaves it
// out: the query rows a group_by run predicts across all its series.
const DefaultMaxRunPredictRows = 1_000_000

// MaxInlineSeries bounds the series a run's reply lists inline; the rest
// are in its task report ('regressd task show', GET /api/v3/runs/<task>).
const MaxInlineSeries = 20

// SeriesCounts is a group_by run's series by outcome: skipped ones ended
// by a documented rule (min_history, nothing to predict); failed ones had
// at least one batch fail.
type SeriesCounts struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Skipped   int `json:"skipped"`
	Failed    int `json:"failed"`
}

// SeriesResult is one series of a group_by run: its tags and its own task's
// outcome. Predictions are a dry run's, null where the model gave none.
type SeriesResult struct {
	TaskID          string            `json:"task_id"`
	Tags            map[string]string `json:"tags"`
	Status          Status            `json:"status"`
	Written         int64             `json:"written"`
	SkippedExisting int               `json:"skipped_existing"`
	Message         string            `json:"message,omitempty"`
	Predictions     []Prediction      `json:"predictions,omitempty"`
}

// SeriesTaskID names the task of one series of a parent task; key is the
// series' tags as FormatTags writes them.
func SeriesTaskID(parent, key string) string {
	sum := sha256.Sum256([]byte(key))
	return parent + "-s" + hex.EncodeToString(sum[:8])
}
