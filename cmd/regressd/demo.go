package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
)

// demoData is Seattle's daily weather 2012–2015 (NOAA via vega-datasets,
// BSD-3-Clause): precipitation, temp_min, wind, temp_max.
//
//go:embed testdata/seattle_weather.csv
var demoData []byte

// demoCommand runs the whole pipeline once on sample data with real gaps.
type demoCommand struct {
	m *Main
}

func (c *demoCommand) Synopsis() string {
	return "fill gaps in a sample weather table end to end (embedded NATS and PostgreSQL by default)"
}

const demoTable = "demo_weather"

type demoRow struct {
	t                       time.Time
	precip, tmin, wind, tmx float64
	gap                     bool
}

func (c *demoCommand) Run(ctx context.Context, args []string) error {
	rc := &roleCommand{m: c.m, roles: []pipeline.Role{pipeline.Scheduler, pipeline.Producer, pipeline.Worker, pipeline.Writer}, name: "demo", synopsis: c.Synopsis()}
	fs := rc.flags()
	model := fs.String("model", defaultModel(), "built-in model to fill the gaps with (see 'regressd models')")
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q; run 'regressd demo -h'", fs.Arg(0))
	}
	// The demo's API listens on a free port so it never clashes with a
	// running regressd; its data lives in --data-dir like any run.
	rc.common.httpAddr = "127.0.0.1:0"
	if rc.common.logLevel == "info" {
		rc.common.logLevel = "warn"
	}
	cfg, err := rc.config()
	if err != nil {
		return err
	}
	fmt.Fprintln(c.m.Stdout, "regressd demo: starting NATS, PostgreSQL and every role …")
	began := time.Now()
	p, err := pipeline.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	rows, err := parseDemo()
	if err != nil {
		return err
	}
	if err := loadDemo(ctx, p.Pool, rows); err != nil {
		return err
	}
	gaps := 0
	for _, r := range rows {
		if r.gap {
			gaps++
		}
	}
	fmt.Fprintf(c.m.Stdout, "loaded %s: %d daily rows (Seattle 2012–2015), temp_max blanked on %d days in runs of 1–7 days\n", demoTable, len(rows), gaps)

	admin := &triggerCommand{m: &Main{Stdout: io.Discard, Stderr: c.m.Stderr}, server: p.URL()}
	admin.call(ctx, http.MethodDelete, "/api/v3/configure/processing_engine_trigger?trigger_name="+demoTable, nil, nil)
	targs := fmt.Sprintf("measurement=%s,field=temp_max,feature_fields=precipitation temp_min wind,model=%s,tags=station:SEA,max_train_rows=1500,max_predict_rows=5000,predict_batch_size=100", demoTable, *model)
	if err := admin.call(ctx, http.MethodPost, "/api/v3/configure/processing_engine_trigger",
		map[string]any{"trigger_name": demoTable, "trigger_specification": "request:" + demoTable, "trigger_arguments": targs}, nil); err != nil {
		return fmt.Errorf("create demo trigger: %w", err)
	}
	fmt.Fprintf(c.m.Stdout, "trigger %s: request:%s, %s\n", demoTable, demoTable, targs)

	// start_time alone reads [start, now): a new window, so a new job, each run.
	body := fmt.Sprintf(`{"start_time":"%s"}`, rows[0].t.Format(time.RFC3339))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/api/v3/engine/"+demoTable, strings.NewReader(body))
	req.Header.Set("X-Service-Api-Key", "demo-key")
	req.Header.Set("Content-Type", "application/json")
	runStart := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("run demo trigger: %w", err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	took := time.Since(runStart)
	fmt.Fprintf(c.m.Stdout, "POST /api/v3/engine/%s → HTTP %d in %s\n%s\n", demoTable, res.StatusCode, took.Round(time.Millisecond), bytes.TrimSpace(answer))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("demo run failed (HTTP %d)", res.StatusCode)
	}
	return c.report(ctx, p.Pool, rows, time.Since(began))
}

// report prints a sample of what was written, scored against the true values
// the demo blanked out.
func (c *demoCommand) report(ctx context.Context, pool *pgxpool.Pool, rows []demoRow, total time.Duration) error {
	truth := map[int64]float64{}
	for _, r := range rows {
		if r.gap {
			truth[r.t.Unix()] = r.tmx
		}
	}
	q, err := pool.Query(ctx, `SELECT "time", value, model FROM demo_weather_regressed WHERE target = 'temp_max' ORDER BY "time"`)
	if err != nil {
		return fmt.Errorf("read predictions: %w", err)
	}
	defer q.Close()
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(c.m.Stdout, "\nfirst predictions written to demo_weather_regressed (actual = the value the demo blanked):")
	fmt.Fprintln(tw, "time\tpredicted\tactual\terror\tmodel\t")
	var n int
	var se, ae, sum, sumsq float64
	for q.Next() {
		var t time.Time
		var v float64
		var model string
		if err := q.Scan(&t, &v, &model); err != nil {
			return err
		}
		a, ok := truth[t.Unix()]
		if !ok {
			continue
		}
		n++
		se += (v - a) * (v - a)
		ae += math.Abs(v - a)
		sum += a
		sumsq += a * a
		if n <= 8 {
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%+.1f\t%s\t\n", t.UTC().Format("2006-01-02"), v, a, v-a, model)
		}
	}
	tw.Flush()
	if n == 0 {
		return fmt.Errorf("no predictions found in demo_weather_regressed")
	}
	mean := sum / float64(n)
	r2 := 1 - se/(sumsq-float64(n)*mean*mean)
	fmt.Fprintf(c.m.Stdout, "\n%d of %d gaps filled · MAE %.2f °C · RMSE %.2f °C · R² %.3f against the blanked truth · %s end to end\n",
		n, len(truth), ae/float64(n), math.Sqrt(se/float64(n)), r2, total.Round(time.Millisecond))
	fmt.Fprintln(c.m.Stdout, "The source table demo_weather was not modified; predictions live in demo_weather_regressed.")
	return nil
}

func defaultModel() string { return gpu.DefaultModel }

func parseDemo() ([]demoRow, error) {
	recs, err := csv.NewReader(bytes.NewReader(demoData)).ReadAll()
	if err != nil || len(recs) < 2 {
		return nil, fmt.Errorf("demo data: %v", err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	rows := make([]demoRow, 0, len(recs)-1)
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
		// Gaps come in runs, as sensor outages do.
		if gapLeft == 0 && rng.Float64() < 0.03 {
			gapLeft = 1 + rng.IntN(7)
		}
		gap := gapLeft > 0
		if gap {
			gapLeft--
		}
		rows = append(rows, demoRow{t: t, precip: v[0], tmin: v[1], wind: v[2], tmx: v[3], gap: gap})
	}
	return rows, nil
}

// loadDemo (re)creates the sample measurement and clears earlier predictions.
func loadDemo(ctx context.Context, pool *pgxpool.Pool, rows []demoRow) error {
	ddl := `DROP TABLE IF EXISTS demo_weather_regressed;
		DROP TABLE IF EXISTS demo_weather;
		CREATE TABLE demo_weather ("time" timestamptz NOT NULL, station text NOT NULL,
			precipitation double precision, temp_min double precision, wind double precision, temp_max double precision)`
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create demo table: %w", err)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{demoTable}, []string{"time", "station", "precipitation", "temp_min", "wind", "temp_max"},
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			r := rows[i]
			var tmx any = r.tmx
			if r.gap {
				tmx = nil
			}
			return []any{r.t, "SEA", r.precip, r.tmin, r.wind, tmx}, nil
		}))
	if err != nil {
		return fmt.Errorf("load demo table: %w", err)
	}
	return nil
}
