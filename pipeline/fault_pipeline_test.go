package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

// deployment is a regressd deployment of role processes sharing one NATS and
// one PostgreSQL, as in production.
type deployment struct {
	t        *testing.T
	natsURL  string
	dbURL    string
	dir      string
	httpPort int
	env      []string
	procs    map[string]*roleProc
	order    []string
}

// faultAckWait is the AckWait the fault tests run with: how soon work held
// by a killed process is delivered again.
const faultAckWait = "2s"

func newPipeline(t *testing.T, natsURL, dbURL string, env ...string) *deployment {
	t.Helper()
	pl := &deployment{t: t, natsURL: natsURL, dbURL: dbURL, dir: t.TempDir(), httpPort: freePort(t), procs: map[string]*roleProc{}}
	pl.env = append([]string{"REGRESSD_SECRET=fault-test-secret-0123456789", bus.EnvAckWait + "=" + faultAckWait,
		"SERVICE_API_KEY=test-key"}, env...)
	t.Cleanup(func() {
		for _, name := range pl.order {
			pl.procs[name].kill()
		}
		if t.Failed() || os.Getenv("REGRESSD_FAULT_LOGS") != "" {
			// REGRESSD_FAULT_LOGS=N shows the last N lines of every log, failed or not.
			n, _ := strconv.Atoi(os.Getenv("REGRESSD_FAULT_LOGS"))
			for _, name := range pl.order {
				t.Logf("--- %s log (tail) ---\n%s", name, tail(pl.procs[name].log, max(n, 25)))
			}
		}
	})
	return pl
}

// add declares a role process; flags are appended to the common ones.
func (pl *deployment) add(name, role string, flags ...string) *roleProc {
	httpAddr := "127.0.0.1:0"
	if role == "scheduler" {
		httpAddr = fmt.Sprintf("127.0.0.1:%d", pl.httpPort)
	}
	args := append([]string{role, "--nats-url", pl.natsURL, "--database-url", pl.dbURL, "--data-dir", pl.dir,
		"--http-addr", httpAddr, "--gateway-addr", "127.0.0.1:0", "--concurrency", "2", "--wait-timeout", "5s",
		"--log-level", "debug"}, flags...)
	p := &roleProc{t: pl.t, name: name, args: args, env: pl.env, log: filepath.Join(pl.dir, name+".log")}
	pl.procs[name] = p
	pl.order = append(pl.order, name)
	return p
}

// standard declares one process of each pipeline role.
func (pl *deployment) standard(flags ...string) {
	for _, r := range []string{"scheduler", "producer", "worker", "writer"} {
		pl.add(r, r, flags...)
	}
}

func (pl *deployment) startAll() {
	for _, name := range pl.order {
		pl.procs[name].start()
	}
	pl.waitReady(60 * time.Second)
}

// waitReady waits until every process has said it is ready since its last start.
func (pl *deployment) waitReady(within time.Duration) {
	pl.t.Helper()
	for _, name := range pl.order {
		pl.procs[name].waitReady(within)
	}
}

// waitReady waits until the process has said it is ready since its last start.
func (p *roleProc) waitReady(within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for !readySinceStart(p.log) {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready after %v:\n%s", p.name, within, tail(p.log, 15))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readySinceStart reports whether the process log at path says "regressd
// ready" after its last "=== start". (Counting starts against readies was
// wrong: a process killed before it was ready leaves a start with no ready
// for ever, and every later wait then timed out on a healthy process.)
func readySinceStart(path string) bool {
	b, _ := os.ReadFile(path)
	i := bytes.LastIndex(b, []byte("=== start"))
	return i >= 0 && bytes.Contains(b[i:], []byte("regressd ready"))
}

func (pl *deployment) url() string { return fmt.Sprintf("http://127.0.0.1:%d", pl.httpPort) }

// faultLoad is the input every fault test runs: one measurement with a
// series per host, a request trigger per host, and windows that do not overlap.
type faultLoad struct {
	table   string
	hosts   []string
	windows int
	span    time.Duration // of a window; rows are hourly
	gapEach int
	batch   int
	// groupBy runs each window as one task over every host (group_by=host)
	// instead of one task per host.
	groupBy bool
}

type faultTask struct {
	trigger    string
	start, end time.Time
}

func defaultLoad(table string) faultLoad {
	return faultLoad{table: table, hosts: []string{"a", "b", "c", "d"}, windows: 6, span: 120 * time.Hour, gapEach: 6, batch: 4}
}

func (l faultLoad) tasks() []faultTask {
	var out []faultTask
	for w := 0; w < l.windows; w++ {
		if l.groupBy {
			s := pipelinetest.T0.Add(time.Duration(w) * l.span)
			out = append(out, faultTask{trigger: l.table + "_all", start: s, end: s.Add(l.span)})
			continue
		}
		for _, h := range l.hosts {
			s := pipelinetest.T0.Add(time.Duration(w) * l.span)
			out = append(out, faultTask{trigger: l.table + "_" + h, start: s, end: s.Add(l.span)})
		}
	}
	return out
}

// rows is the number of predictions a fault-free run writes.
func (l faultLoad) rows() int {
	per := int(l.span / time.Hour)
	gaps := 0
	for i := 0; i < per*l.windows; i++ {
		if i%l.gapEach == 0 {
			gaps++
		}
	}
	return gaps * len(l.hosts)
}

// setup creates the table and the triggers (straight into the registry).
func (l faultLoad) setup(t *testing.T, pool *pgxpool.Pool, js jetstream.JetStream, model string, extraArgs string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s ("time" timestamptz NOT NULL, host text, x1 double precision, x2 double precision, y double precision)`,
		pgx.Identifier{l.table}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	n := int(l.span/time.Hour) * l.windows
	for hi, h := range l.hosts {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{l.table}, []string{"time", "host", "x1", "x2", "y"}, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
			x1 := math.Sin(float64(i+hi*17) / 7)
			x2 := math.Cos(float64(i+hi*5) / 11)
			var y any = 2*x1 - x2 + 0.01*math.Sin(float64(i)*1.3)
			if i%l.gapEach == 0 {
				y = nil
			}
			return []any{pipelinetest.T0.Add(time.Duration(i) * time.Hour), h, x1, x2, y}, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	store, err := scheduler.OpenStore(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	names := l.hosts
	if l.groupBy {
		names = []string{"all"}
	}
	for _, h := range names {
		a := fmt.Sprintf("measurement=%s,field=y,feature_fields=x1 x2,model=%s,tags=host:%s,min_history=20,window=%s,predict_batch_size=%d",
			l.table, model, h, "30d", l.batch)
		if l.groupBy {
			a = fmt.Sprintf("measurement=%s,field=y,feature_fields=x1 x2,model=%s,group_by=host,min_history=20,window=%s,predict_batch_size=%d",
				l.table, model, "30d", l.batch)
		}
		if !strings.Contains(extraArgs, "max_retries=") {
			// The faults below are outages a deployment rides out: the
			// most attempts per call and write (a batch that still fails
			// would make its task partial, which these tests refuse).
			a += fmt.Sprintf(",max_retries=%d", scheduler.MaxRetries)
		}
		if extraArgs != "" {
			a += "," + extraArgs
		}
		m, err := scheduler.SplitArgs(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Create(ctx, scheduler.Trigger{Name: l.table + "_" + h, Spec: "request:" + l.table + "_" + h, Args: m}); err != nil {
			t.Fatal(err)
		}
	}
}

// submit runs every task through the engine endpoint at base, starting them
// spread over the given time, the way a client that retries does: a refused
// connection, a 503 or a 202 is asked again, which the job's id makes the
// same task. It returns each task's final result status.
func submit(t *testing.T, ctx context.Context, base func() string, tasks []faultTask, spread time.Duration) map[faultTask]string {
	t.Helper()
	var mu sync.Mutex
	out := map[faultTask]string{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for i, tk := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if len(tasks) > 1 {
				select {
				case <-time.After(spread * time.Duration(i) / time.Duration(len(tasks))):
				case <-ctx.Done():
				}
			}
			status, err := runTask(ctx, client, base, tk)
			if err != nil {
				t.Errorf("task %s [%s, %s): %v", tk.trigger, tk.start.Format(time.RFC3339), tk.end.Format(time.RFC3339), err)
			}
			mu.Lock()
			out[tk] = status
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// runTask asks for a task's window and follows it to its end: on 202 by
// polling the task it names (asking for the window again once it ended
// would be a new run), on a lost connection or a 5xx without a task by
// asking again, which joins the window's run if it is under way. If it
// has ended, the answer is a new run that found the window written
// (skipped, nothing written, every row already predicted): the lost
// request's run did the work, and that counts as its success.
func runTask(ctx context.Context, client *http.Client, base func() string, tk faultTask) (string, error) {
	body, _ := json.Marshal(pipelinetest.Window(tk.start, tk.end))
	var last, taskID string
	lost := false // a request was sent whose answer never came
	for ctx.Err() == nil {
		method, path, rd := http.MethodPost, "/api/v3/engine/"+tk.trigger, strings.NewReader(string(body))
		if taskID != "" {
			method, path, rd = http.MethodGet, path+"/tasks/"+taskID, strings.NewReader("")
		}
		req, _ := http.NewRequestWithContext(ctx, method, base()+path, rd)
		req.Header.Set("X-Service-Api-Key", "test-key")
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			last, lost = err.Error(), lost || taskID == ""
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var out map[string]any
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil && taskID == "" {
			lost = true // cut off mid-answer
		}
		id, named := out["task_id"].(string)
		switch {
		case taskID != "" && res.StatusCode == http.StatusOK:
			if s, _ := out["status"].(string); s != "running" {
				return s, nil
			}
			time.Sleep(200 * time.Millisecond)
		case taskID != "" && res.StatusCode == http.StatusNotFound:
			// Asked of a scheduler that has not heard of it yet.
			time.Sleep(200 * time.Millisecond)
		case res.StatusCode == http.StatusOK:
			r, _ := out["result"].(map[string]any)
			s, _ := r["status"].(string)
			if lost && s == "skipped" && pipelinetest.Num(r["written"]) == 0 && pipelinetest.Num(r["query_rows"]) == 0 &&
				pipelinetest.Num(r["skipped_existing"]) > 0 {
				return "success", nil
			}
			return s, nil
		case res.StatusCode == http.StatusAccepted:
			taskID, last = id, fmt.Sprintf("HTTP %d %v", res.StatusCode, out)
			time.Sleep(200 * time.Millisecond)
		case res.StatusCode >= 500 && (!named || taskID != ""):
			last = fmt.Sprintf("HTTP %d %v", res.StatusCode, out)
			time.Sleep(200 * time.Millisecond)
		default:
			return "failed", fmt.Errorf("HTTP %d: %v", res.StatusCode, out)
		}
	}
	return "", fmt.Errorf("gave up: %v (last answer: %s)", ctx.Err(), last)
}

// snapshot reads a regressed table as identity → value.
func snapshot(t *testing.T, pool *pgxpool.Pool, table string) map[string]float64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), fmt.Sprintf(`SELECT "time", coalesce(host, '<null>'), model, source, target, value FROM %s`,
		pgx.Identifier{table + "_regressed"}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var tm time.Time
		var host, model, source, target string
		var v float64
		if err := rows.Scan(&tm, &host, &model, &source, &target, &v); err != nil {
			t.Fatal(err)
		}
		k := strings.Join([]string{tm.UTC().Format(time.RFC3339), host, model, source, target}, "|")
		if _, dup := out[k]; dup {
			t.Errorf("row %s is in the table twice", k)
		}
		out[k] = v
	}
	return out
}

// reference runs load on a fault-free in-process regressd and returns its table.
func reference(t *testing.T, load faultLoad, model, extraArgs string, flags ...string) map[string]float64 {
	t.Helper()
	began := time.Now()
	e := pipelinetest.Start(t, flags...)
	defer func() {
		e.Stop()
		t.Logf("fault-free reference run: %d rows in %v", load.rows(), time.Since(began).Round(time.Millisecond))
		if os.Getenv("REGRESSD_FAULT_LOGS") != "" {
			t.Logf("--- reference run log ---\n%s", e.Logs.String())
		}
	}()
	load.setup(t, e.Pool, e.P.JS, model, extraArgs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for tk, s := range submit(t, ctx, func() string { return e.URL }, load.tasks(), 0) {
		if s != "success" {
			t.Fatalf("reference run: task %v ended %q", tk, s)
		}
	}
	ref := snapshot(t, e.Pool, load.table)
	if len(ref) != load.rows() {
		t.Fatalf("reference run wrote %d rows, want %d", len(ref), load.rows())
	}
	return ref
}

// sameAsReference checks the table against the fault-free run — no row
// missing, none twice, no value different — and the ledger: every task
// succeeded with every batch, and every row was written exactly once.
func sameAsReference(t *testing.T, pool *pgxpool.Pool, load faultLoad, ref map[string]float64) {
	t.Helper()
	got := snapshot(t, pool, load.table)
	var missing, extra, differ []string
	for k, v := range ref {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case g != v && math.Abs(g-v) > 1e-9*math.Max(1, math.Abs(v)):
			differ = append(differ, fmt.Sprintf("%s: %v, want %v", k, g, v))
		}
	}
	for k := range got {
		if _, ok := ref[k]; !ok {
			extra = append(extra, k)
		}
	}
	for what, list := range map[string][]string{"missing": missing, "not in the fault-free run": extra, "different": differ} {
		if len(list) > 0 {
			sort.Strings(list)
			t.Errorf("%d row(s) %s, e.g. %s", len(list), what, strings.Join(list[:min(3, len(list))], "; "))
		}
	}
	// A request asked again after its connection was lost, once its run
	// had ended, is a run of its own that finds the window written: it
	// writes nothing and is not counted here.
	var tasks, ok, written, rows int
	err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FILTER (WHERE NOT (status = 'skipped' AND written = 0 AND skipped_existing > 0)),
		count(*) FILTER (WHERE status = 'success' AND batches_done = batches AND batches_failed = 0),
		coalesce(sum(written), 0), (SELECT count(*) FROM %s) FROM regressd_tasks WHERE trigger_name LIKE $1 AND parent_id = ''`,
		pgx.Identifier{load.table + "_regressed"}.Sanitize()), load.table+"\\_%").Scan(&tasks, &ok, &written, &rows)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(load.tasks()); tasks != want || ok != want {
		t.Errorf("ledger: %d tasks, %d complete and successful; want %d of %d", tasks, ok, want, want)
	}
	if written != rows {
		t.Errorf("ledger says %d rows written for %d rows in the table: a row was written twice", written, rows)
	}
}

// connect opens a test client on the pipeline's NATS.
// stage prepares a fault run on natsURL and dbURL: the streams with the
// given replicas, the ledger schema, the load's table and triggers, and a
// pipeline of role processes (none started yet).
func stage(t *testing.T, load faultLoad, model, natsURL, dbURL string, replicas int) (jetstream.JetStream, *pgxpool.Pool, *deployment) {
	t.Helper()
	js := connect(t, natsURL)
	ensureStreams(t, js, replicas)
	pool := newPool(t, dbURL)
	if err := schemas.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	load.setup(t, pool, js, model, "")
	return js, pool, newPipeline(t, natsURL, dbURL)
}

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// ensureStreams creates regressd's streams as a role would, retrying while a
// fresh cluster elects its leaders.
func ensureStreams(t *testing.T, js jetstream.JetStream, replicas int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := bus.Ensure(ctx, js, bus.Config{Replicas: replicas})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ensure streams: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
