package writer

// A result's quantile columns (schemas.ResultSchemaFor), for the regressed
// table and a dry run's preview.

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/regressd/regressd/schemas"
)

// rowQuantiles is row i's n quantiles (columns 2…), NaN where null.
func rowQuantiles(rec arrow.RecordBatch, n, i int) []float64 {
	out := make([]float64, n)
	for k := range out {
		c := rec.Column(2 + k).(*array.Float64)
		out[k] = math.NaN()
		if c.IsValid(i) {
			out[k] = c.Value(i)
		}
	}
	return out
}

// previewQuantiles adds each previewed row's quantiles by column name.
func previewQuantiles(rec arrow.RecordBatch, levels []float64, preview []schemas.Prediction) {
	if len(levels) == 0 {
		return
	}
	names := schemas.QuantileColumns(levels)
	for i := range preview {
		m := make(map[string]*float64, len(names))
		for k, name := range names {
			c := rec.Column(2 + k).(*array.Float64)
			if c.IsValid(i) {
				v := c.Value(i)
				m[name] = &v
			} else {
				m[name] = nil
			}
		}
		preview[i].Quantiles = m
	}
}
