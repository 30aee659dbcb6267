package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a UI over a real JetStream and, with a database, a real
// PostgreSQL; it serves on a real listener.
type fixture struct {
	t     *testing.T
	url   string
	sched *scheduler.Scheduler
	srv   *bustest.Server
}

func newFixture(t *testing.T, db *tsdb.DB, tokens ...string) *fixture {
	t.Helper()
	srv := bustest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sealer, err := schemas.NewSealer([]byte("ui-test-secret-ui-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(ctx, srv.JS, scheduler.Config{Sealer: sealer, AuthTokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(Config{Triggers: s.Store(), JS: srv.JS, DB: db, Authorize: s.Authorize})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	u.Routes(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &fixture{t: t, url: hs.URL, sched: s, srv: srv}
}

func (f *fixture) get(path string, header ...string) (*http.Response, []byte) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.url+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// getJSON asks for path and decodes the answer, which must have status want.
func (f *fixture) getJSON(path string, want int, v any) {
	f.t.Helper()
	res, b := f.get(path)
	if res.StatusCode != want {
		f.t.Fatalf("GET %s: HTTP %d, want %d: %s", path, res.StatusCode, want, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		f.t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(b, v); err != nil {
		f.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

func (f *fixture) createTrigger(name, spec string, args map[string]string) {
	f.t.Helper()
	if err := f.sched.Store().Create(context.Background(), scheduler.Trigger{Name: name, Spec: spec, Args: args}); err != nil {
		f.t.Fatal(err)
	}
}

func TestPageAndAssets(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/ui/", "/ui/triggers/weather", "/ui/runs/t_1"} {
		res, body := f.get(path)
		h := res.Header
		if res.StatusCode != http.StatusOK || h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("Cache-Control") != "no-cache" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: HTTP %d headers %v", path, res.StatusCode, h)
		}
		if !strings.Contains(string(body), `id="app"`) {
			t.Fatalf("GET %s: no page: %s", path, body)
		}
	}
	if res, _ := f.get("/ui"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: HTTP %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := f.get("/ui/nope"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("/ui/nope: HTTP %d", res.StatusCode)
	}
	// The trigger's name reaches the page escaped, as data.
	_, body := f.get("/ui/triggers/%3Cb%3E%22x")
	if !strings.Contains(string(body), `data-name="&lt;b&gt;&#34;x"`) {
		t.Fatalf("name not escaped: %s", body)
	}

	_, body = f.get("/ui/")
	urls := regexp.MustCompile(`(?:href|src)="(/ui/assets/[^"]+)"`).FindAllStringSubmatch(string(body), -1)
	want := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", "LICENSE": "text/plain; charset=utf-8"}
	seen := map[string]bool{}
	for _, m := range urls {
		u := m[1]
		kind := u[strings.LastIndexAny(u, "./"):]
		if strings.HasSuffix(u, "/LICENSE") {
			kind = "LICENSE"
		}
		seen[kind] = true
		res, b := f.get(u)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != want[kind] || len(b) == 0 ||
			res.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" || res.Header.Get("ETag") == "" {
			t.Fatalf("GET %s: HTTP %d, headers %v", u, res.StatusCode, res.Header)
		}
		if res, _ := f.get(u, "If-None-Match", res.Header.Get("ETag")); res.StatusCode != http.StatusNotModified {
			t.Fatalf("GET %s with its ETag: HTTP %d, want 304", u, res.StatusCode)
		}
		// A page from an older build names an older hash: the current file,
		// revalidated rather than cached for good.
		parts := strings.SplitN(strings.TrimPrefix(u, assetsPrefix), "/", 2)
		if res, b2 := f.get(assetsPrefix + "000000000000/" + parts[1]); res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-cache" || string(b2) != string(b) {
			t.Fatalf("GET %s under an old hash: HTTP %d, %v", u, res.StatusCode, res.Header)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("assets linked: %v (want scripts, styles and uPlot's licence)", urls)
	}
	for _, u := range []string{assetsPrefix + "x/nope.js", assetsPrefix + "x/index.html"} {
		if res, _ := f.get(u); res.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s: HTTP %d", u, res.StatusCode)
		}
	}
}

// TestAuthorization: with tokens set, the page, its assets and its JSON are
// behind the admin API's Bearer rule.
func TestAuthorization(t *testing.T) {
	f := newFixture(t, nil, "tok-1")
	for _, path := range []string{"/ui/", "/ui/triggers/x", assetsPrefix + "x/app.js", "/api/v3/status", "/api/v3/runs", "/api/v3/triggers/x/series"} {
		if res, _ := f.get(path); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s without a token: HTTP %d", path, res.StatusCode)
		}
		if res, _ := f.get(path, "Authorization", "Bearer nope"); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s with a wrong token: HTTP %d", path, res.StatusCode)
		}
	}
	if res, b := f.get("/api/v3/status", "Authorization", "Bearer tok-1"); res.StatusCode != http.StatusOK {
		t.Fatalf("status with the token: HTTP %d: %s", res.StatusCode, b)
	}
	if res, _ := f.get("/ui/", "Authorization", "Bearer tok-1"); res.StatusCode != http.StatusOK {
		t.Fatalf("page with the token: HTTP %d", res.StatusCode)
	}
}

// TestStatusWithoutDatabase: a scheduler alone with no database still
// lists triggers, dead letters and breakers, and says what it cannot show.
func TestStatusWithoutDatabase(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.createTrigger("every5", "every:5m", map[string]string{"measurement": "m", "field": "y", "feature_fields": "x", "model": "v/model-1"})
	if _, err := f.sched.Store().SetDisabled(ctx, "every5", true); err != nil {
		t.Fatal(err)
	}
	// Two dead letters, and two workers: one breaker open.
	for range 2 {
		if _, err := f.srv.JS.PublishMsg(ctx, &nats.Msg{Subject: schemas.SubjectDLQ + "jobs", Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var st statusResponse
	f.getJSON("/api/v3/status", http.StatusOK, &st)
	if st.Breaker.State != breakerUnknown || !strings.Contains(st.Breaker.Message, "no worker") {
		t.Fatalf("breaker with no worker: %+v", st.Breaker)
	}
	kv, err := f.srv.JS.KeyValue(ctx, schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	for w, state := range map[string]string{"w1": schemas.BreakerClosed, "w2": schemas.BreakerOpen} {
		b, _ := json.Marshal(schemas.WorkerStatus{Worker: w, Breaker: state, Updated: time.Now()})
		if _, err := kv.Put(ctx, schemas.WorkerStatusKey(w), b); err != nil {
			t.Fatal(err)
		}
	}
	f.getJSON("/api/v3/status", http.StatusOK, &st)
	if len(st.Triggers) != 1 || st.Triggers[0].Name != "every5" || st.Triggers[0].Enabled || st.Triggers[0].LastRun != nil {
		t.Fatalf("triggers %+v", st.Triggers)
	}
	if st.DeadLetters.Count == nil || *st.DeadLetters.Count != 2 {
		t.Fatalf("dead letters %+v, want 2", st.DeadLetters)
	}
	if st.Breaker.State != schemas.BreakerOpen || len(st.Breaker.Workers) != 2 || !strings.Contains(st.Breaker.Message, "w2 open") {
		t.Fatalf("breaker %+v, want open (w2)", st.Breaker)
	}
	if st.Ledger.Available || !strings.Contains(st.Ledger.Message, "--database-url") || len(st.RecentRuns) != 0 {
		t.Fatalf("ledger %+v", st.Ledger)
	}
	var e map[string]string
	f.getJSON("/api/v3/runs", http.StatusServiceUnavailable, &e)
	f.getJSON("/api/v3/runs/t_1", http.StatusServiceUnavailable, &e)
	f.getJSON("/api/v3/triggers/every5/series", http.StatusServiceUnavailable, &e)
	if !strings.Contains(e["error"], "no database") {
		t.Fatalf("series without a database: %v", e)
	}
	f.getJSON("/api/v3/triggers/nope/series", http.StatusNotFound, &e)
}

// TestRunsAndSeries reads runs and series from a real ledger and tables,
// as the writer leaves them.
func TestRunsAndSeries(t *testing.T) {
	pool := pgtest.New(t)
	f := newFixture(t, tsdb.New(pool))
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE TABLE m ("time" timestamptz NOT NULL, site text, y double precision, x double precision)`)
	exec(`INSERT INTO m SELECT $1::timestamptz + i * interval '1 hour', s, CASE WHEN i % 4 = 3 THEN NULL ELSE i END, i
		FROM generate_series(0, 19) i, (VALUES ('a'), ('b')) AS sites(s)`, t0)
	exec(`CREATE TABLE m_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL, model text NOT NULL,
		source text NOT NULL, target text NOT NULL, site text)`)
	exec(`INSERT INTO m_regressed SELECT $1::timestamptz + i * interval '1 hour', i + 0.5, 'v/model-1', 'm', 'y', 'a'
		FROM generate_series(3, 19, 4) i`, t0)
	exec(`INSERT INTO regressd_tasks (task_id, trigger_name, measurement, target, model, window_start, window_end, origin, status, batches, batches_done, written)
		VALUES ('t_a', 'pinned', 'm', 'y', 'v/model-1', $1, $2, 'webhook', 'success', 1, 1, 5),
		       ('t_b', 'open', 'm', 'y', 'v/model-1', $1, $3, 'webhook', 'success', 1, 1, 0)`, t0, t0.Add(20*time.Hour), t0.Add(10*time.Hour))
	exec(`INSERT INTO regressd_task_batches (task_id, batch_no, status, rows, written) VALUES ('t_a', 0, 'ok', 5, 5)`)
	f.createTrigger("pinned", "request:pinned", map[string]string{"measurement": "m", "field": "y", "feature_fields": "x",
		"model": "v/model-1", "tags": "site:a"})
	f.createTrigger("open", "request:open", map[string]string{"model": "v/model-1"})
	f.createTrigger("fresh", "every:1h", map[string]string{"measurement": "m", "field": "y", "feature_fields": "x",
		"model": "v/model-1", "tags": "site:b", "window": "2d", "max_read_rows": "7"})

	var st statusResponse
	f.getJSON("/api/v3/status", http.StatusOK, &st)
	if !st.Ledger.Available || len(st.RecentRuns) != 2 || len(st.Triggers) != 3 {
		t.Fatalf("status %+v", st)
	}
	for _, tr := range st.Triggers {
		if (tr.Name == "fresh") != (tr.LastRun == nil) {
			t.Fatalf("trigger %s last run %+v", tr.Name, tr.LastRun)
		}
	}
	var runs runsResponse
	f.getJSON("/api/v3/runs?trigger=pinned", http.StatusOK, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].TaskID != "t_a" || runs.Runs[0].Written != 5 {
		t.Fatalf("runs of pinned %+v", runs)
	}
	var e map[string]string
	for _, bad := range []string{"0", "x", "1001"} {
		f.getJSON("/api/v3/runs?limit="+bad, http.StatusBadRequest, &e)
	}
	var run runResponse
	f.getJSON("/api/v3/runs/t_a", http.StatusOK, &run)
	if run.Run.Trigger != "pinned" || len(run.Batches) != 1 || run.Batches[0].Written != 5 {
		t.Fatalf("run %+v", run)
	}
	f.getJSON("/api/v3/runs/t_zz", http.StatusNotFound, &e)

	// The pinned series over its last run's window: 20 rows, 5 gaps, 5 filled.
	var s seriesResponse
	f.getJSON("/api/v3/triggers/pinned/series", http.StatusOK, &s)
	if s.WindowFrom != windowLastRun || s.LastRun != "t_a" || !s.End.Equal(t0.Add(20*time.Hour)) || len(s.Observed) != 20 ||
		len(s.Filled) != 5 || s.Tags["site"] != "a" || s.Limit != 50000 || s.Intervals {
		t.Fatalf("pinned series: from %s, %d observed, %d filled, tags %v", s.WindowFrom, len(s.Observed), len(s.Filled), s.Tags)
	}
	// Asked for a window, it is that window.
	f.getJSON("/api/v3/triggers/pinned/series?start=2026-01-01T05:00:00Z&end=2026-01-01T10:00:00Z", http.StatusOK, &s)
	if s.WindowFrom != windowRequest || len(s.Observed) != 5 || len(s.Filled) != 1 {
		t.Fatalf("asked window: %d observed %d filled", len(s.Observed), len(s.Filled))
	}
	f.getJSON("/api/v3/triggers/pinned/series?start=yesterday", http.StatusBadRequest, &e)
	f.getJSON("/api/v3/triggers/pinned/series?start=2026-01-02&end=2026-01-01", http.StatusBadRequest, &e)

	// A trigger that leaves the series to the body: the measurement comes
	// from its last run; two sites are refused until ?tags= picks one.
	f.getJSON("/api/v3/triggers/open/series", http.StatusConflict, &e)
	if !strings.Contains(e["error"], "more than one series") || !strings.Contains(e["error"], "?tags=") {
		t.Fatalf("two series: %v", e)
	}
	f.getJSON("/api/v3/triggers/open/series?tags=site:a", http.StatusOK, &s)
	if len(s.Observed) != 10 || len(s.Filled) != 2 || s.Measurement != "m" {
		t.Fatalf("open series, site a: %d observed %d filled", len(s.Observed), len(s.Filled))
	}
	f.getJSON("/api/v3/triggers/open/series?tags=nope", http.StatusBadRequest, &e)
	f.getJSON("/api/v3/triggers/open/series?tags=planet:x", http.StatusNotFound, &e)

	// A trigger that has not run: its window ending now (here: empty), cut
	// at its max_read_rows.
	f.getJSON("/api/v3/triggers/fresh/series", http.StatusOK, &s)
	if s.WindowFrom != windowTrigger || s.End.Sub(s.Start) != 48*time.Hour || s.Limit != 7 || len(s.Observed) != 0 {
		t.Fatalf("fresh series: %+v", s)
	}
	f.getJSON("/api/v3/triggers/fresh/series?start=2026-01-01", http.StatusOK, &s)
	if len(s.Observed) != 7 || !s.ObservedTruncated || len(s.Filled) != 0 {
		t.Fatalf("fresh series, cut: %d observed, truncated %v", len(s.Observed), s.ObservedTruncated)
	}
}
