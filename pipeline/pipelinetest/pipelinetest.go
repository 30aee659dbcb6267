// Package pipelinetest gives tests a running regressd: every role but the
// gateway started by pipeline.Start on a real embedded JetStream and a real
// PostgreSQL database of its own, and the helpers the end-to-end tests
// share (synthetic tables, triggers, engine calls).
package pipelinetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// SyncBuffer collects logs written from many goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Env is a running regressd (every role but the gateway) on a real
// embedded JetStream and a real PostgreSQL database of its own.
type Env struct {
	T       *testing.T
	URL     string // engine API
	DataDir string
	DBURL   string
	Pool    *pgxpool.Pool
	Logs    *SyncBuffer
	P       *pipeline.Pipeline
	Stop    func()
}

// Start runs the scheduler, producer, worker and writer until the test
// ends, configured as their command line would (see Config): extra flags
// add to or override the defaults.
func Start(t *testing.T, extra ...string) *Env {
	t.Helper()
	return StartWith(t, nil, extra...)
}

// StartWith is Start with edit applied to the configuration before the
// pipeline starts (a test's tracer provider, say).
func StartWith(t *testing.T, edit func(*pipeline.Config), extra ...string) *Env {
	t.Helper()
	e := &Env{T: t, DataDir: t.TempDir(), DBURL: pgtest.URL(t), Logs: &SyncBuffer{}}
	args := append([]string{"--data-dir", e.DataDir, "--database-url", e.DBURL, "--nats-listen", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	cfg, err := Config(args, e.Logs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Roles = []pipeline.Role{pipeline.Scheduler, pipeline.Producer, pipeline.Worker, pipeline.Writer}
	if edit != nil {
		edit(&cfg)
	}
	p, err := pipeline.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.P, e.URL, e.Pool, e.Stop = p, p.URL(), p.Pool, p.Close
	t.Cleanup(e.Stop)
	return e
}

// Config reads the flags of a role command that tests use into a pipeline
// configuration (no roles), logging to logs: --data-dir, --database-url,
// --nats-url, --nats-listen, --http-addr, --gateway-addr, --replicas,
// --predictor, --gateway-url, --concurrency, --wait-timeout, --config-dir,
// --log-level.
// REGRESSD_SECRET, SERVICE_API_KEY and REGRESSD_AUTH_TOKENS come from the
// environment, as for the commands.
func Config(args []string, logs io.Writer) (pipeline.Config, error) {
	var c pipeline.Config
	var level string
	fs := flag.NewFlagSet("pipelinetest", flag.ContinueOnError)
	fs.StringVar(&c.DataDir, "data-dir", "", "")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "")
	fs.StringVar(&c.NATSURL, "nats-url", "", "")
	fs.StringVar(&c.NATSListen, "nats-listen", "", "")
	fs.StringVar(&c.HTTPAddr, "http-addr", "", "")
	fs.StringVar(&c.GatewayAddr, "gateway-addr", "", "")
	fs.IntVar(&c.Replicas, "replicas", 1, "")
	fs.StringVar(&c.Predictor, "predictor", "", "")
	fs.StringVar(&c.GatewayURL, "gateway-url", "", "")
	fs.IntVar(&c.Concurrency, "concurrency", 2, "")
	fs.DurationVar(&c.WaitTimeout, "wait-timeout", 10*time.Minute, "")
	fs.StringVar(&c.ConfigDir, "config-dir", "", "")
	fs.StringVar(&level, "log-level", "info", "")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var lvl slog.Level
	lvl.UnmarshalText([]byte(level))
	c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: lvl}))
	c.Secret, c.ServiceKey = []byte(os.Getenv("REGRESSD_SECRET")), os.Getenv("SERVICE_API_KEY")
	c.AuthTokens = strings.FieldsFunc(os.Getenv("REGRESSD_AUTH_TOKENS"), func(r rune) bool { return r == ',' || r == ' ' })
	return c, nil
}

// SeriesSpec is a synthetic measurement: y = 2·x1 − x2 + small noise, hourly.
type SeriesSpec struct {
	Table   string
	Tags    map[string]string // extra tag columns and values
	Start   time.Time
	Rows    int
	GapEach int // every GapEach-th row has an empty target
}

// MakeTable creates (if need be) and fills a synthetic measurement.
func (e *Env) MakeTable(s SeriesSpec) {
	e.T.Helper()
	ctx := context.Background()
	cols := `"time" timestamptz NOT NULL, x1 double precision, x2 double precision, y double precision`
	var tagNames []string
	for k := range s.Tags {
		tagNames = append(tagNames, k)
	}
	for _, k := range tagNames {
		cols += ", " + pgx.Identifier{k}.Sanitize() + " text"
	}
	if _, err := e.Pool.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", pgx.Identifier{s.Table}.Sanitize(), cols)); err != nil {
		e.T.Fatal(err)
	}
	names := append([]string{"time", "x1", "x2", "y"}, tagNames...)
	_, err := e.Pool.CopyFrom(ctx, pgx.Identifier{s.Table}, names, pgx.CopyFromSlice(s.Rows, func(i int) ([]any, error) {
		x1 := math.Sin(float64(i) / 7)
		x2 := math.Cos(float64(i) / 11)
		var y any = 2*x1 - x2 + 0.01*math.Sin(float64(i)*1.3)
		if s.GapEach > 0 && i%s.GapEach == 0 {
			y = nil
		}
		row := []any{s.Start.Add(time.Duration(i) * time.Hour), x1, x2, y}
		for _, k := range tagNames {
			row = append(row, s.Tags[k])
		}
		return row, nil
	}))
	if err != nil {
		e.T.Fatal(err)
	}
}

// Table makes a synthetic measurement and a request trigger of the same
// name over it, with args.
func (e *Env) Table(s SeriesSpec, args string) {
	e.T.Helper()
	e.MakeTable(s)
	e.CreateTrigger(s.Table, "request:"+s.Table, args)
}

// CreateTrigger creates a trigger through the admin API.
func (e *Env) CreateTrigger(name, spec, args string) {
	e.T.Helper()
	e.CreateTriggerWith(nil, name, spec, args)
}

// CreateTriggerWith is CreateTrigger with request headers.
func (e *Env) CreateTriggerWith(headers map[string]string, name, spec, args string) {
	e.T.Helper()
	status, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", headers,
		map[string]any{"trigger_name": name, "trigger_specification": spec, "trigger_arguments": args})
	if status != http.StatusCreated {
		e.T.Fatalf("create trigger: HTTP %d: %s", status, body)
	}
}

// engine calls the engine endpoint with a service key.
func (e *Env) Engine(trigger string, body any) (int, map[string]any) {
	e.T.Helper()
	status, raw := e.Do(http.MethodPost, "/api/v3/engine/"+trigger, map[string]string{"X-Service-Api-Key": "test-key"}, body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.T.Fatalf("engine answer not JSON (HTTP %d): %s", status, raw)
	}
	return status, out
}

// Do sends a request to the engine API; body is JSON unless a string or bytes.
func (e *Env) Do(method, path string, headers map[string]string, body any) (int, []byte) {
	e.T.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.URL+path, r)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// Count runs a query that counts.
func (e *Env) Count(sql string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.T.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Result is the result object of an engine answer.
func Result(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	r, ok := out["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %v", out)
	}
	return r
}

// Num is a JSON number as an int.
func Num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// AnswerLikeVendor answers a /predict call the way the vendor's hosted
// gateway does, predicting 2·x1 − x2 (the synthetic tables' law).
func AnswerLikeVendor(w http.ResponseWriter, r *http.Request) {
	var req struct {
		XTest [][]*float64 `json:"X_test"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	preds := make([]float64, len(req.XTest))
	for i, row := range req.XTest {
		preds[i] = *row[0]*2 - *row[1]
	}
	json.NewEncoder(w).Encode(map[string]any{"task": "regression", "predictions": preds,
		"usage": map[string]int{"input_tokens": 1, "output_tokens": len(preds), "total_tokens": 1 + len(preds)}})
}

// WaitObjects waits until the context store holds exactly the named objects
// of a task (its plan and context are named after it), failing after 10s.
func (e *Env) WaitObjects(taskID string, want ...string) {
	e.T.Helper()
	ctx := context.Background()
	obj, err := e.P.JS.ObjectStore(ctx, schemas.StoreContext)
	if err != nil {
		e.T.Fatal(err)
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = got[:0]
		infos, err := obj.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			e.T.Fatal(err)
		}
		for _, info := range infos {
			if strings.HasSuffix(info.Name, "/"+taskID) {
				got = append(got, info.Name)
			}
		}
		if slices.Equal(got, want) {
			return
		}
	}
	e.T.Fatalf("objects of task %s: %v, want %v", taskID, got, want)
}

// DefaultModel is the built-in model the tests run.
func DefaultModel() string { return gpu.DefaultModel }

// T0 is when the synthetic series start.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Args are a trigger's arguments over a synthetic table, with extra ones.
func Args(table string, extra string) string {
	return ArgsModel(table, DefaultModel(), extra)
}

// ArgsModel is Args with a model.
func ArgsModel(table, model, extra string) string {
	a := "measurement=" + table + ",field=y,feature_fields=x1 x2,model=" + model + ",min_history=20"
	if extra != "" {
		a += "," + extra
	}
	return a
}

// Window is an engine request body for [from, to).
func Window(from, to time.Time) map[string]any {
	return map[string]any{"start_time": from.Format(time.RFC3339), "end_time": to.Format(time.RFC3339)}
}

// SourceChecksum is a digest of a table's rows: the source must not change.
func (e *Env) SourceChecksum(table string) string {
	var s string
	if err := e.Pool.QueryRow(context.Background(), `SELECT md5(string_agg(t::text, '|' ORDER BY "time")) FROM `+table+` t`).Scan(&s); err != nil {
		e.T.Fatal(err)
	}
	return s
}

// PublishRaw publishes a message as given, for poison and forged messages.
func (e *Env) PublishRaw(subject string, hdr map[string]string, data []byte) {
	e.T.Helper()
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	if _, err := e.P.JS.PublishMsg(context.Background(), m); err != nil {
		e.T.Fatal(err)
	}
}

// MustArgs resolves trigger arguments, complete.
func MustArgs(t *testing.T, s string) schemas.RunArgs {
	t.Helper()
	m, err := scheduler.SplitArgs(s)
	if err != nil {
		t.Fatal(err)
	}
	a, err := scheduler.ResolveArgs(m, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// WaitUntil polls ok until it holds, failing after within.
func WaitUntil(t *testing.T, within time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FakeVendor stands in for the vendor's hosted gateway, which we cannot run:
// it answers like the real one, and fails the calls fail() picks.
func FakeVendor(t *testing.T, fail func(call int64) int) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Header.Get("Authorization") != "Api-Key test-key" {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"error": "bad key"})
			return
		}
		if code := fail(n); code != 0 {
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]string{"error": "injected"})
			return
		}
		AnswerLikeVendor(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// DeadLetters are the dead letters on filter (schemas.SubjectDLQ+">": all).
func (e *Env) DeadLetters(filter string) []bus.DeadLetterEntry {
	e.T.Helper()
	q, err := bus.OpenDLQ(context.Background(), e.P.JS)
	if err != nil {
		e.T.Fatal(err)
	}
	entries, err := q.List(context.Background(), filter, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	return entries
}
