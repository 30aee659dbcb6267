package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) {
	runNATSHelper() // when asked to, this process is a NATS server for the fault tests, and exits
	code := pgtest.Main(m)
	removeBuiltBinary()
	os.Exit(code)
}

// syncBuffer collects logs written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a running regressd (every role but the gateway) on a real embedded
// JetStream and a real PostgreSQL database of its own.
type env struct {
	t       *testing.T
	url     string // engine API
	dataDir string
	dbURL   string
	pool    *pgxpool.Pool
	logs    *syncBuffer
	st      *pipeline.Pipeline
	stop    func()
}

func startEnv(t *testing.T, extra ...string) *env {
	t.Helper()
	e := &env{t: t, dataDir: t.TempDir(), dbURL: pgtest.URL(t), logs: &syncBuffer{}}
	m := &Main{Stdout: io.Discard, Stderr: e.logs}
	rc := &roleCommand{m: m, roles: []pipeline.Role{pipeline.Scheduler, pipeline.Producer, pipeline.Worker, pipeline.Writer}, synopsis: "test"}
	fs := rc.flags()
	args := append([]string{"--data-dir", e.dataDir, "--database-url", e.dbURL, "--nats-listen", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.config()
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.st, e.url, e.pool, e.stop = p, p.URL(), p.Pool, p.Close
	t.Cleanup(e.stop)
	return e
}

// series is a synthetic measurement: y = 2·x1 − x2 + small noise, hourly.
type seriesSpec struct {
	table   string
	tags    map[string]string // extra tag columns and values
	start   time.Time
	rows    int
	gapEach int // every gapEach-th row has an empty target
}

func (e *env) makeTable(s seriesSpec) {
	e.t.Helper()
	ctx := context.Background()
	cols := `"time" timestamptz NOT NULL, x1 double precision, x2 double precision, y double precision`
	var tagNames []string
	for k := range s.tags {
		tagNames = append(tagNames, k)
	}
	for _, k := range tagNames {
		cols += ", " + pgx.Identifier{k}.Sanitize() + " text"
	}
	if _, err := e.pool.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", pgx.Identifier{s.table}.Sanitize(), cols)); err != nil {
		e.t.Fatal(err)
	}
	names := append([]string{"time", "x1", "x2", "y"}, tagNames...)
	_, err := e.pool.CopyFrom(ctx, pgx.Identifier{s.table}, names, pgx.CopyFromSlice(s.rows, func(i int) ([]any, error) {
		x1 := math.Sin(float64(i) / 7)
		x2 := math.Cos(float64(i) / 11)
		var y any = 2*x1 - x2 + 0.01*math.Sin(float64(i)*1.3)
		if s.gapEach > 0 && i%s.gapEach == 0 {
			y = nil
		}
		row := []any{s.start.Add(time.Duration(i) * time.Hour), x1, x2, y}
		for _, k := range tagNames {
			row = append(row, s.tags[k])
		}
		return row, nil
	}))
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createTrigger(name, spec, args string) {
	e.t.Helper()
	e.createTriggerWith(nil, name, spec, args)
}

func (e *env) createTriggerWith(headers map[string]string, name, spec, args string) {
	e.t.Helper()
	status, body := e.do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", headers,
		map[string]any{"trigger_name": name, "trigger_specification": spec, "trigger_arguments": args})
	if status != http.StatusCreated {
		e.t.Fatalf("create trigger: HTTP %d: %s", status, body)
	}
}

// engine calls the engine endpoint with a service key.
func (e *env) engine(trigger string, body any) (int, map[string]any) {
	e.t.Helper()
	status, raw := e.do(http.MethodPost, "/api/v3/engine/"+trigger, map[string]string{"X-Service-Api-Key": "test-key"}, body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("engine answer not JSON (HTTP %d): %s", status, raw)
	}
	return status, out
}

func (e *env) do(method, path string, headers map[string]string, body any) (int, []byte) {
	e.t.Helper()
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
	req, _ := http.NewRequest(method, e.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func result(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	r, ok := out["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %v", out)
	}
	return r
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// answerLikeVendor answers a /predict call the way the vendor's hosted
// gateway does, predicting 2·x1 − x2 (the synthetic tables' law).
func answerLikeVendor(w http.ResponseWriter, r *http.Request) {
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

// waitObjects waits until the context store holds exactly the named objects
// of a task (its plan and context are named after it), failing after 10s.
func (e *env) waitObjects(taskID string, want ...string) {
	e.t.Helper()
	ctx := context.Background()
	obj, err := e.st.JS.ObjectStore(ctx, schemas.StoreContext)
	if err != nil {
		e.t.Fatal(err)
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = got[:0]
		infos, err := obj.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			e.t.Fatal(err)
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
	e.t.Fatalf("objects of task %s: %v, want %v", taskID, got, want)
}

func defaultModel() string { return gpu.DefaultModel }
