// Package demo is the sample run of 'regressd demo': Seattle's daily
// weather with temp_max blanked in runs of days, loaded into PostgreSQL,
// filled by the pipeline through its engine endpoint, and the predictions
// scored against the values that were blanked.
package demo

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/scheduler"
)

// data is Seattle's daily weather 2012–2015 (NOAA via vega-datasets,
// BSD-3-Clause): precipitation, temp_min, wind, temp_max.
//
//go:embed seattle_weather.csv
var data []byte

// Table is the sample measurement; its predictions go to Table_regressed.
const Table = "demo_weather"

// Row is one day of the sample; Gap says temp_max was blanked.
type Row struct {
	Time                     time.Time
	Precip, TMin, Wind, TMax float64
	Gap                      bool
}

// Rows reads the sample, with gaps in runs of 1–7 days, as sensor outages
// come; the same gaps every time.
func Rows() ([]Row, error) {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) < 2 {
		return nil, fmt.Errorf("demo data: %v", err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	rows := make([]Row, 0, len(recs)-1)
	gapLeft := 0
	for _, r := range recs[1:] {
		t, err := time.Parse("2006-01-02", r[0])
		if err != nil {
			return nil, fmt.Errorf("demo data: %w", err)
		}
		var v [4]float64
		for i := range v {
			if v[i], err = strconv.ParseFloat(r[1+i], 64); err != nil {
				return nil, fmt.Errorf("demo data: %w", err)
			}
		}
		if gapLeft == 0 && rng.Float64() < 0.03 {
			gapLeft = 1 + rng.IntN(7)
		}
		gap := gapLeft > 0
		if gap {
			gapLeft--
		}
		rows = append(rows, Row{Time: t, Precip: v[0], TMin: v[1], Wind: v[2], TMax: v[3], Gap: gap})
	}
	return rows, nil
}

// Gaps counts the blanked rows.
func Gaps(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Gap {
			n++
		}
	}
	return n
}

// Load (re)creates the sample measurement and drops earlier predictions.
func Load(ctx context.Context, pool *pgxpool.Pool, rows []Row) error {
	ddl := `DROP TABLE IF EXISTS demo_weather_regressed;
		DROP TABLE IF EXISTS demo_weather;
		CREATE TABLE demo_weather ("time" timestamptz NOT NULL, station text NOT NULL,
			precipitation double precision, temp_min double precision, wind double precision, temp_max double precision)`
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create demo table: %w", err)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{Table}, []string{"time", "station", "precipitation", "temp_min", "wind", "temp_max"},
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			r := rows[i]
			var tmx any = r.TMax
			if r.Gap {
				tmx = nil
			}
			return []any{r.Time, "SEA", r.Precip, r.TMin, r.Wind, tmx}, nil
		}))
	if err != nil {
		return fmt.Errorf("load demo table: %w", err)
	}
	return nil
}

// TriggerArgs are the demo trigger's arguments for model.
func TriggerArgs(model string) string {
	return fmt.Sprintf("measurement=%s,field=temp_max,feature_fields=precipitation temp_min wind,model=%s,tags=station:SEA,max_train_rows=1500,max_predict_rows=5000,predict_batch_size=100", Table, model)
}

// CreateTrigger (re)creates the demo's request trigger on a running API.
func CreateTrigger(ctx context.Context, c *scheduler.Client, model string) error {
	c.DeleteTrigger(ctx, Table)
	if _, err := c.CreateTrigger(ctx, Table, "request:"+Table, TriggerArgs(model), false); err != nil {
		return fmt.Errorf("create demo trigger: %w", err)
	}
	return nil
}

// Prediction is a prediction written for a blanked day.
type Prediction struct {
	Time              time.Time
	Predicted, Actual float64
	Model             string
}

// Score is how the predictions did against the blanked values.
type Score struct {
	Sample        []Prediction // the first few, oldest first
	Filled, Gaps  int
	MAE, RMSE, R2 float64
}

// Read reads the predictions written for the blanked days and scores them.
func Read(ctx context.Context, pool *pgxpool.Pool, rows []Row, sample int) (Score, error) {
	truth := map[int64]float64{}
	for _, r := range rows {
		if r.Gap {
			truth[r.Time.Unix()] = r.TMax
		}
	}
	sc := Score{Gaps: len(truth)}
	q, err := pool.Query(ctx, `SELECT "time", value, model FROM demo_weather_regressed WHERE target = 'temp_max' ORDER BY "time"`)
	if err != nil {
		return sc, fmt.Errorf("read predictions: %w", err)
	}
	defer q.Close()
	var se, ae, sum, sumsq float64
	for q.Next() {
		var p Prediction
		if err := q.Scan(&p.Time, &p.Predicted, &p.Model); err != nil {
			return sc, err
		}
		var ok bool
		if p.Actual, ok = truth[p.Time.Unix()]; !ok {
			continue
		}
		sc.Filled++
		d := p.Predicted - p.Actual
		se, ae, sum, sumsq = se+d*d, ae+math.Abs(d), sum+p.Actual, sumsq+p.Actual*p.Actual
		if len(sc.Sample) < sample {
			sc.Sample = append(sc.Sample, p)
		}
	}
	if err := q.Err(); err != nil {
		return sc, err
	}
	if sc.Filled == 0 {
		return sc, fmt.Errorf("no predictions found in demo_weather_regressed")
	}
	n := float64(sc.Filled)
	mean := sum / n
	sc.MAE, sc.RMSE, sc.R2 = ae/n, math.Sqrt(se/n), 1-se/(sumsq-n*mean*mean)
	return sc, nil
}
