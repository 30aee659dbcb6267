package scheduler

// group_by: many series in one run. Trigger-only, as the write targets are:
// a request body cannot set it (it is not one of bodyKeys).

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/regressd/regressd/schemas"
)

func init() {
	argDefaults["group_by"] = ""
	argDefaults["max_run_predict_rows"] = strconv.Itoa(schemas.DefaultMaxRunPredictRows)
}

// resolveGroupBy reads group_by and max_run_predict_rows into run, adding
// their problems to errs.
func resolveGroupBy(args map[string]string, run *Run, errs []error) []error {
	r := &run.Args
	seen := map[string]bool{}
	for _, c := range strings.Fields(args["group_by"]) {
		switch {
		case seen[c]:
			continue
		case c == "time":
			errs = append(errs, errors.New(`group_by: "time" is the timestamp column, not a tag column`))
		case c == r.Field:
			errs = append(errs, fmt.Errorf("group_by: %q is the target field, not a tag column", c))
		case containsString(r.FeatureFields, c):
			errs = append(errs, fmt.Errorf("group_by: %q is a feature field, not a tag column", c))
		default:
			if err := checkIdent("group_by column", c); err != nil {
				errs = append(errs, err)
				continue
			}
			r.GroupBy = append(r.GroupBy, c)
		}
		seen[c] = true
	}
	v := strings.TrimSpace(args["max_run_predict_rows"])
	if v == "" {
		v = argDefaults["max_run_predict_rows"]
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("max_run_predict_rows: %q is not a whole number", v))
	case n < 1:
		errs = append(errs, fmt.Errorf("max_run_predict_rows: must be at least 1, got %d", n))
	default:
		r.MaxRunPredictRows = n
	}
	return errs
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// addSeriesResult adds a group_by run's series to an engine reply's result:
// their counts (result.series) and the first of them (result.series_results,
// every one with its predictions in a dry run); the rest are in the task's
// report (GET /api/v3/runs/<task>, 'regressd task show').
func addSeriesResult(result map[string]any, sum schemas.TaskSummary) {
	if sum.Series == nil {
		return
	}
	result["series"] = sum.Series
	list := sum.SeriesResults
	if sum.Status != schemas.StatusDryRun && len(list) > schemas.MaxInlineSeries {
		list = list[:schemas.MaxInlineSeries]
	}
	result["series_results"] = list
	for _, sr := range list {
		if sr.Predictions != nil { // a dry run's, whatever its status
			result["series_results"] = dryRunSeriesList(list)
			break
		}
	}
	if len(list) < sum.Series.Total {
		result["series_more"] = fmt.Sprintf("%d more series: regressd task show %s", sum.Series.Total-len(list), sum.TaskID)
	}
	if sum.Status == schemas.StatusDryRun {
		delete(result, "predictions")
		delete(result, "times")
	}
}
