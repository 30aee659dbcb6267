package producer

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

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
// before the model is called: too little history (lacking, when not "",
// says why: rows with a target that miss a feature), or nothing left to
// predict; nil when it runs.
func skipVerdict(examples, minHistory, queries, skippedExisting int, lacking string) *verdict {
	switch {
	case examples < minHistory:
		return &verdict{schemas.StatusSkipped, http.StatusOK, fmt.Sprintf("%d rows with a target value and every feature in the window, fewer than min_history=%d%s: the model was not called", examples, minHistory, lacking)}
	case queries == 0 && skippedExisting > 0:
		return &verdict{schemas.StatusSkipped, http.StatusOK, fmt.Sprintf("no rows to predict: all %d rows with an empty target already have a prediction (skip_existing=true)", skippedExisting)}
	case queries == 0:
		return &verdict{schemas.StatusSkipped, http.StatusOK, "no rows to predict in the window (no row has an empty target with every feature present)"}
	}
	return nil
}

// lacking says how many rows have a target value but miss a feature (NULL,
// NaN or ±Inf), and which features they miss: "" when none do.
func (w window) lacking(features []string) string {
	n, missed := 0, make([]bool, len(w.features))
	for i := 0; i < w.rows(); i++ {
		if w.target.IsNull(i) || w.featuresPresent(i) {
			continue
		}
		n++
		for j, f := range w.features {
			missed[j] = missed[j] || f.IsNull(i)
		}
	}
	if n == 0 {
		return ""
	}
	var names []string
	for j, m := range missed {
		if m {
			names = append(names, strconv.Quote(features[j]))
		}
	}
	return fmt.Sprintf(" (%d rows with a target value lack feature%s %s)", n, map[bool]string{true: "s"}[len(names) > 1], strings.Join(names, ", "))
}
