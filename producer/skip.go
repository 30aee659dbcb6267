package producer

import (
	"fmt"
	"net/http"

	"github.com/regressd/regressd/schemas"
)

// dropExisting keeps the queries whose time has no prediction yet
// (skip_existing) and says how many it dropped.
func (w window) dropExisting(queries []int, existing map[int64]struct{}) (kept []int, dropped int) {
	kept = queries[:0]
	for _, i := range queries {
		if _, ok := existing[int64(w.times.Value(i))]; !ok {
			kept = append(kept, i)
		}
	}
	return kept, len(queries) - len(kept)
}

// skipVerdict is the run rule a planned task or series is skipped by
// before the model is called: too little history, or nothing left to
// predict; nil when it runs.
func skipVerdict(examples, minHistory, queries, skippedExisting int) *verdict {
	switch {
	case examples < minHistory:
		return &verdict{schemas.StatusSkipped, http.StatusOK, fmt.Sprintf("%d rows with a target value in the window, fewer than min_history=%d: the model was not called", examples, minHistory)}
	case queries == 0 && skippedExisting > 0:
		return &verdict{schemas.StatusSkipped, http.StatusOK, fmt.Sprintf("no rows to predict: all %d rows with an empty target already have a prediction (skip_existing=true)", skippedExisting)}
	case queries == 0:
		return &verdict{schemas.StatusSkipped, http.StatusOK, "no rows to predict in the window (no row has an empty target with every feature present)"}
	}
	return nil
}
