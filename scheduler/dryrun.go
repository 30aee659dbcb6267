package scheduler

import (
	"time"

	"github.com/regressd/regressd/schemas"
)

// dryRunColumns lays a dry run's predictions out as the plugin answers
// them: the values aligned with the query rows, null where the model gave
// none, their times alongside, and each quantile column likewise (nil when
// none was asked for).
func dryRunColumns(ps []schemas.Prediction) (values []*float64, times []time.Time, quantiles map[string][]*float64) {
	values, times = make([]*float64, len(ps)), make([]time.Time, len(ps))
	for i, p := range ps {
		values[i], times[i] = p.Value, p.Time
		for name, v := range p.Quantiles {
			if quantiles == nil {
				quantiles = map[string][]*float64{}
			}
			if quantiles[name] == nil {
				quantiles[name] = make([]*float64, len(ps))
			}
			quantiles[name][i] = v
		}
	}
	return values, times, quantiles
}

// dryRunSeries is one series of a group_by dry run in the engine's reply:
// its predictions in the same columns as a single series' run.
type dryRunSeries struct {
	schemas.SeriesResult
	Predictions []*float64            `json:"predictions"`
	Times       []time.Time           `json:"times"`
	Quantiles   map[string][]*float64 `json:"quantiles,omitempty"`
}

func dryRunSeriesList(list []schemas.SeriesResult) []dryRunSeries {
	out := make([]dryRunSeries, len(list))
	for i, s := range list {
		out[i].SeriesResult = s
		out[i].Predictions, out[i].Times, out[i].Quantiles = dryRunColumns(s.Predictions)
	}
	return out
}
