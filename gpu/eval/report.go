package eval

// Report is an evaluation's scores beside the baselines: what
// 'regressd eval --json' prints.
type Report struct {
	Model       string          `json:"model"`
	Folds       string          `json:"folds"`
	SuiteMeanR2 float64         `json:"suite_mean_r2"`
	Datasets    []DatasetReport `json:"datasets"`
	// SuiteCoverage80 is the mean over datasets of the 80% intervals'
	// coverage; SuiteScoreRatio the mean of the per-dataset interval-score
	// ratios (ours / the quantile baseline's) and ScoreBelowBaseline on how
	// many datasets ours is the lower.
	SuiteCoverage80    float64            `json:"suite_coverage80"`
	SuiteScoreRatio    *float64           `json:"suite_interval_score_ratio,omitempty"`
	ScoreBelowBaseline *int               `json:"interval_score_below_baseline,omitempty"`
	BaselineSuiteMean  map[string]float64 `json:"baseline_suite_mean_r2,omitempty"`
	BaselinesFrom      string             `json:"baselines_from,omitempty"`
	Seconds            float64            `json:"seconds"`
}

// DatasetReport is one dataset's scores beside its baselines.
type DatasetReport struct {
	DatasetResult
	Baselines         map[string]Score `json:"baselines,omitempty"`
	BaselineIntervals *IntervalScore   `json:"baseline_intervals_80,omitempty"`
	// ScoreRatio is our interval score over the quantile baseline's.
	ScoreRatio *float64 `json:"interval_score_ratio,omitempty"`
}

// NewReport joins the engine's scores with the baselines (nil: none).
func NewReport(res Result, bl *Baselines, model string, kind Folds) Report {
	out := Report{Model: model, Folds: string(kind), SuiteMeanR2: res.SuiteMeanR2, SuiteCoverage80: res.SuiteCoverage80}
	var ratios float64
	var nRatios, below int
	for _, d := range res.Datasets {
		dj := DatasetReport{DatasetResult: d}
		if bl != nil {
			dj.Baselines = bl.Datasets[d.Name]
			if b, ok := bl.Intervals.Datasets[d.Name]; ok && d.Intervals != nil {
				dj.BaselineIntervals = &b
				if b.Score > 0 {
					r := d.Intervals.Score / b.Score
					dj.ScoreRatio = &r
					ratios += r
					nRatios++
					if r < 1 {
						below++
					}
				}
			}
		}
		out.Datasets = append(out.Datasets, dj)
	}
	if nRatios > 0 {
		m := ratios / float64(nRatios)
		out.SuiteScoreRatio, out.ScoreBelowBaseline = &m, &below
	}
	if bl != nil {
		out.BaselineSuiteMean = bl.SuiteMean
		out.BaselinesFrom = bl.Source
	}
	return out
}
