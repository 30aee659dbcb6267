package producer

import (
	"fmt"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// checkQuantileColumns refuses quantile columns (p10, p2_5, …) that a tag
// column of the source would also write into the regressed table.
func checkQuantileColumns(t tsdb.Table, a schemas.RunArgs) []error {
	var errs []error
	for i, c := range schemas.QuantileColumns(a.Quantiles) {
		if col, ok := t.Column(c); ok && col.Kind == tsdb.KindTag {
			errs = append(errs, fmt.Errorf("quantiles: level %v writes the column %q, which the tag column %q of %q also writes in the regressed table: rename the tag column or ask for another level",
				a.Quantiles[i], c, c, t.Name))
		}
	}
	return errs
}
