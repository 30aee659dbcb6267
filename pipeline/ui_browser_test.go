package pipeline_test

import (
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/ui/uitest"
)

// uiScreenshot, when set, is where TestStatusPageInBrowser saves a PNG of
// the filled series (the README's picture):
//
//	go test ./pipeline -run TestStatusPageInBrowser -ui-screenshot $PWD/docs/status-page.png
var uiScreenshot = flag.String("ui-screenshot", "", "TestStatusPageInBrowser: save a PNG of the series chart here")

// TestStatusPageInBrowser drives the status page in a real Chromium against
// a running regressd: after a run the page lists the trigger with it, the
// trigger's chart holds as many filled points as the run wrote, the run's
// page shows its report, and no page logs an error.
func TestStatusPageInBrowser(t *testing.T) {
	b := uitest.New(t)
	e := pipelinetest.Start(t)
	// The README's example, as a user follows it: 100 hourly readings,
	// every tenth without temp_max.
	if _, err := e.Pool.Exec(t.Context(), readmeWeather); err != nil {
		t.Fatal(err)
	}
	e.CreateTrigger("weather", "request:weather",
		"measurement=weather,field=temp_max,feature_fields=temp_min wind,model="+pipelinetest.DefaultModel()+",tags=station:SEA")
	status, out := e.Engine("weather", map[string]any{"start_time": "2025-01-01T00:00:00Z"})
	if status != http.StatusOK {
		t.Fatalf("run: HTTP %d: %v", status, out)
	}
	r := pipelinetest.Result(t, out)
	written := pipelinetest.Num(r["written"])
	if written != 10 {
		t.Fatalf("written=%d, want 10 (every tenth of 100 rows)", written)
	}
	taskID := out["task_id"].(string)
	ready := chromedp.WaitVisible(chromedp.CSS(`#app[data-ready="true"]`))
	filledJS := `window.regressd.filledSeries.reduce((n, i) => n + window.regressd.chart.data[i].filter((v) => v !== null).length, 0)`
	bandsJS := `(window.regressd.chart.bands || []).length`

	b.Do(chromedp.Navigate(e.URL+"/ui/"), ready)
	text := uitest.Run(b, chromedp.Text(chromedp.CSS("#app")))
	for _, want := range []string{"weather", "request:weather", "enabled", "success", taskID, "closed"} {
		if !strings.Contains(text, want) {
			t.Fatalf("overview lacks %q:\n%s", want, text)
		}
	}
	lastRun := uitest.Run(b, chromedp.Text(`//table//tr[td/a[text()="weather"]]/td[4]`))
	if !strings.Contains(lastRun, "success") || !strings.Contains(lastRun, taskID) {
		t.Fatalf("the trigger's last run cell reads %q", lastRun)
	}
	b.NoProblems("overview")

	b.Do(chromedp.Navigate(e.URL+"/ui/triggers/weather"), ready)
	filled := uitest.Run(b, chromedp.Evaluate[int](filledJS))
	bands := uitest.Run(b, chromedp.Evaluate[int](bandsJS))
	canvases := uitest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("#chart canvas").length`))
	if filled != written || canvases != 1 || bands != 0 {
		t.Fatalf("chart: %d filled points (want %d), %d canvases, %d bands", filled, written, canvases, bands)
	}
	note := uitest.Run(b, chromedp.Text(chromedp.CSS("#chart-note")))
	if !strings.Contains(note, "10 filled") || !strings.Contains(note, "90 observed") || !strings.Contains(note, "station=SEA") {
		t.Fatalf("chart note: %q", note)
	}
	b.NoProblems("trigger page")
	if *uiScreenshot != "" {
		b.Do(chromedp.EmulateViewport(960, 700), chromedp.Reload(), ready)
		png := uitest.Run(b, chromedp.Screenshot(chromedp.CSS("#series")))
		if err := os.WriteFile(*uiScreenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Intervals, once the output table has them, are a band.
	if _, err := e.Pool.Exec(t.Context(), `ALTER TABLE weather_regressed ADD COLUMN p10 double precision, ADD COLUMN p90 double precision`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(t.Context(), `UPDATE weather_regressed SET p10 = value - 0.3, p90 = value + 0.3`); err != nil {
		t.Fatal(err)
	}
	b.Do(chromedp.Navigate(e.URL+"/ui/triggers/weather"), ready)
	if bands, filled := uitest.Run(b, chromedp.Evaluate[int](bandsJS)), uitest.Run(b, chromedp.Evaluate[int](filledJS)); bands != 1 || filled != written {
		t.Fatalf("with p10/p90: %d bands, %d filled points", bands, filled)
	}
	b.NoProblems("trigger page with intervals")

	b.Do(chromedp.Navigate(e.URL+"/ui/runs/"+taskID), ready)
	text = uitest.Run(b, chromedp.Text(chromedp.CSS("#app")))
	for _, want := range []string{taskID, "success", "written", "query rows", "Batches"} {
		if !strings.Contains(text, want) {
			t.Fatalf("run page lacks %q:\n%s", want, text)
		}
	}
	b.NoProblems("run page")
}

// readmeWeather is the README's sample table.
const readmeWeather = `
CREATE TABLE weather ("time" timestamptz NOT NULL, station text NOT NULL,
  temp_min double precision, wind double precision, temp_max double precision);
INSERT INTO weather
SELECT timestamptz '2025-01-01 00:00Z' + i * interval '1 hour', 'SEA',
       5 + 3 * sin(i / 8.0), 2 + i % 7,
       CASE WHEN i % 10 = 9 THEN NULL ELSE 11 + 3 * sin(i / 8.0) + 0.2 * (i % 7) END
FROM generate_series(0, 99) AS i;`

// TestStatusPageNeedsToken: with REGRESSD_AUTH_TOKENS set, the page and
// its JSON are behind the same Bearer rule as the admin API.
func TestStatusPageNeedsToken(t *testing.T) {
	t.Setenv("REGRESSD_AUTH_TOKENS", "ui-token")
	e := pipelinetest.Start(t)
	for _, path := range []string{"/ui/", "/api/v3/status"} {
		if st, _ := e.Do(http.MethodGet, path, nil, nil); st != http.StatusUnauthorized {
			t.Fatalf("GET %s without a token: HTTP %d", path, st)
		}
		if st, body := e.Do(http.MethodGet, path, map[string]string{"Authorization": "Bearer ui-token"}, nil); st != http.StatusOK {
			t.Fatalf("GET %s with the token: HTTP %d: %s", path, st, body)
		}
	}
}
