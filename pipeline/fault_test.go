package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb/pgcluster"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// Every test here runs the same kind of input through a regressd that
// suffers a fault, and compares the final <m>_regressed with a fault-free run
// of the same input: no row missing, no row twice, no value different.

// faultSeed makes the random kill points reproducible: REGRESSD_FAULT_SEED
// replays a run.
func faultSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REGRESSD_FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("REGRESSD_FAULT_SEED=%d", seed)
	return seed
}

// embeddedNATS starts a JetStream server in the test process (it is not the
// thing under fault) and returns its URL.
func embeddedNATS(t *testing.T) string {
	t.Helper()
	e, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e.ClientURL()
}

// faultPredictor is what the workers of a fault test predict with: by
// default a stand-in gateway in this process that answers at once, so the
// tests measure delivery rather than the engine's speed;
// REGRESSD_FAULT_PREDICTOR=local runs them on the built-in engine.
func faultPredictor(t *testing.T) (model string, flags []string) {
	if os.Getenv("REGRESSD_FAULT_PREDICTOR") == "local" {
		return pipelinetest.DefaultModel(), nil
	}
	v := newFlakyVendor(t, 0)
	return "vendor/model-x", []string{"--predictor", "remote", "--gateway-url", v.URL}
}

// reference is the fault predictor's model and flags and the fault-free
// run of the load with them.
func (l faultLoad) reference(t *testing.T) (model string, flags []string, ref map[string]float64) {
	model, flags = faultPredictor(t)
	return model, flags, reference(t, l, model, "", flags...)
}

func faultContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func allSucceeded(t *testing.T, statuses map[faultTask]string, want int) {
	t.Helper()
	n := 0
	for tk, s := range statuses {
		if s == "success" {
			n++
		} else {
			t.Errorf("task %s [%s]: %q", tk.trigger, tk.start.Format(time.RFC3339), s)
		}
	}
	if n != want {
		t.Errorf("%d of %d tasks succeeded", n, want)
	}
}

// TestKillRolesMidTask kills scheduler, producer, worker and writer
// processes with SIGKILL at random points while tasks flow — at least five
// kills of each, twenty in all — plus one SIGTERM of each, and restarts them.
func TestKillRolesMidTask(t *testing.T) {
	t.Parallel() // mostly waiting on processes: overlap with the other fault tests
	rng := rand.New(rand.NewPCG(faultSeed(t), 7))
	load := defaultLoad("fk")
	model, flags, ref := load.reference(t)

	_, pool, pl := stage(t, load, model, embeddedNATS(t), pgtest.URL(t), 1)
	pl.standard(flags...)
	pl.startAll()

	roles := []string{"scheduler", "producer", "worker", "writer"}
	var plan []string
	for _, r := range roles {
		for range 5 {
			plan = append(plan, r)
		}
		plan = append(plan, r+":term")
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

	ctx := faultContext(t, 4*time.Minute)
	done := make(chan map[faultTask]string, 1)
	go func() { done <- submit(t, ctx, pl.url, load.tasks(), 8*time.Second) }()
	for _, step := range plan {
		time.Sleep(time.Duration(100+rng.IntN(450)) * time.Millisecond)
		name, graceful := strings.CutSuffix(step, ":term")
		p := pl.procs[name]
		if graceful {
			p.waitReady(30 * time.Second) // so the stop is the graceful path, not an early signal
			if took := p.term(); took > 30*time.Second {
				t.Errorf("%s took %v to stop on SIGTERM, want at most 30s", name, took)
			}
		} else {
			p.kill()
		}
		p.start()
	}
	statuses := <-done
	allSucceeded(t, statuses, len(load.tasks()))
	sameAsReference(t, pool, load, ref)

	kills, resumed := 0, 0
	for _, r := range roles {
		p := pl.procs[r]
		kills += p.kills
		if p.kills < 5 || p.terms < 1 {
			t.Errorf("%s: %d kills and %d SIGTERMs, want 5 and 1", r, p.kills, p.terms)
		}
		t.Logf("%s: %d kill -9, %d SIGTERM (slowest exit %v)", r, p.kills, p.terms, p.slowestTerm.Round(time.Millisecond))
	}
	resumed = countLines(pl.procs["producer"].log, "publishing its stored plan")
	t.Logf("%d kills; %d jobs delivered again republished their stored plan", kills, resumed)
	if kills < 20 {
		t.Errorf("%d kills, want at least 20", kills)
	}
}

// TestKillRolesMidGroupByRun kills the producer, worker and writer with
// SIGKILL while group_by runs flow (each window one task over four series)
// and restarts them: every gap is still written exactly once, and every
// run ends a success with all its series.
func TestKillRolesMidGroupByRun(t *testing.T) {
	t.Parallel()
	// Each series' 20 gaps a window in batches of 4 (each series alone,
	// its context stored), or in one batch (the series travel in packs).
	for _, c := range []struct {
		name, table string
		batch       int
	}{{"alone", "fg", 4}, {"packed", "fgp", 100}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(faultSeed(t), 21))
			load := defaultLoad(c.table)
			load.groupBy, load.batch = true, c.batch
			model, flags, ref := load.reference(t)

			_, pool, pl := stage(t, load, model, embeddedNATS(t), pgtest.URL(t), 1)
			pl.standard(flags...)
			pl.startAll()
			plan := []string{"producer", "producer", "producer", "worker", "worker", "writer", "writer", "writer"}
			rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

			ctx := faultContext(t, 4*time.Minute)
			done := make(chan map[faultTask]string, 1)
			go func() { done <- submit(t, ctx, pl.url, load.tasks(), 4*time.Second) }()
			for _, name := range plan {
				time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
				p := pl.procs[name]
				p.kill()
				p.start()
			}
			statuses := <-done
			allSucceeded(t, statuses, len(load.tasks()))
			sameAsReference(t, pool, load, ref)
			var series, parents int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE parent_id <> ''), count(*) FILTER (WHERE series_total = 4)
				FROM regressd_tasks WHERE trigger_name = $1`, load.table+"_all").Scan(&series, &parents); err != nil {
				t.Fatal(err)
			}
			if parents < len(load.tasks()) || series < len(load.tasks())*len(load.hosts) {
				t.Errorf("ledger: %d runs of 4 series and %d series tasks, want %d and %d", parents, series, len(load.tasks()), len(load.tasks())*len(load.hosts))
			}
			// Every series of a run in one pack, or each alone.
			logs, _ := os.ReadFile(pl.procs["producer"].log)
			published := regexp.MustCompile(`group_by run published.* packs=(\d+) series_alone=(\d+)`).FindAllStringSubmatch(string(logs), -1)
			if len(published) == 0 {
				t.Fatal("no group_by run published")
			}
			// A job delivered again after a kill plans again what is left:
			// with skip_existing, a series alone whose batches were mostly
			// written may then fit a pack, so only packed runs must always
			// publish alike; every run publishes as planned at least once.
			want, matched := map[bool][2]string{true: {"1", "0"}, false: {"0", "4"}}[c.batch == 100], 0
			for _, m := range published {
				if m[1] == want[0] && m[2] == want[1] {
					matched++
				} else if c.batch == 100 {
					t.Errorf("published %q, want packs=%s series_alone=%s", m[0], want[0], want[1])
				}
			}
			if matched == 0 {
				t.Errorf("no run published with packs=%s series_alone=%s: %q", want[0], want[1], published)
			}
			t.Logf("%d kills; %d jobs delivered again republished a stored plan", len(plan), countLines(pl.procs["producer"].log, "stored plan"))
		})
	}
}

// TestNATSRestartMidRun kills the NATS server (a process started from
// ops/nats/single.conf) twice while tasks flow, and starts it again on its
// store.
func TestNATSRestartMidRun(t *testing.T) {
	t.Parallel() // mostly waiting on processes: overlap with the other fault tests
	load := defaultLoad("fn")
	load.windows = 4
	model, flags, ref := load.reference(t)

	nodes := startNATS(t, 1)
	_, pool, pl := stage(t, load, model, nodes[0].url(), pgtest.URL(t), 1)
	pl.standard(flags...)
	pl.startAll()

	ctx := faultContext(t, 4*time.Minute)
	done := make(chan map[faultTask]string, 1)
	go func() { done <- submit(t, ctx, pl.url, load.tasks(), 6*time.Second) }()
	for _, pause := range []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond} {
		time.Sleep(pause)
		nodes[0].kill()
		time.Sleep(time.Second) // down: roles retry, webhooks answer 503
		nodes[0].start()
		waitPort(t, nodes[0].port, 30*time.Second)
	}
	statuses := <-done
	allSucceeded(t, statuses, len(load.tasks()))
	sameAsReference(t, pool, load, ref)
	for _, name := range pl.order {
		if !pl.procs[name].alive() {
			t.Errorf("%s exited during the NATS restarts", name)
		}
	}
}

// TestPostgresRestartMidWrite stops PostgreSQL while results are being
// written, twice, and starts it again (behind a proxy, so its URL stays).
func TestPostgresRestartMidWrite(t *testing.T) {
	t.Parallel() // mostly waiting on processes: overlap with the other fault tests
	load := defaultLoad("fp")
	// 480 results: the writer is still busy when the database goes, even
	// on a loaded machine that takes a second or two to stop it (160 were
	// sometimes all written by then, and no write failed).
	load.windows, load.batch = 12, 2
	model, flags, ref := load.reference(t)

	dir, err := os.MkdirTemp("", "regressd-pgfault-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	ctx := context.Background()
	cl, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg"), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	var clMu sync.Mutex
	t.Cleanup(func() {
		clMu.Lock()
		cl.Stop()
		clMu.Unlock()
		os.RemoveAll(dir)
	})
	proxy := newProxy(t, fmt.Sprintf("127.0.0.1:%d", cl.Port()))
	dbURL := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pgcluster.Role, proxy.port(), pgcluster.Database)

	_, pool, pl := stage(t, load, model, embeddedNATS(t), dbURL, 1)
	pl.standard(flags...)
	pl.startAll()

	fctx := faultContext(t, 4*time.Minute)
	done := make(chan map[faultTask]string, 1)
	go func() { done <- submit(t, fctx, pl.url, load.tasks(), 0) }()
	restarts := 0
	for _, after := range []int{20, 90} {
		// Mid-write: once the writer has committed this many batches.
		pipelinetest.WaitUntil(t, 90*time.Second, func() bool {
			var n int
			pool.QueryRow(ctx, `SELECT count(*) FROM regressd_task_batches`).Scan(&n)
			return n >= after
		}, fmt.Sprintf("%d batches written", after))
		clMu.Lock()
		if err := cl.Stop(); err != nil {
			t.Fatal(err)
		}
		// Down long enough that results reach the writer meanwhile: on a
		// loaded machine a one-second outage could fall between them, and
		// no write failed.
		time.Sleep(3 * time.Second)
		if cl, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg"), Fast: true}); err != nil {
			t.Fatal(err)
		}
		clMu.Unlock()
		proxy.setTarget(fmt.Sprintf("127.0.0.1:%d", cl.Port()))
		restarts++
	}
	statuses := <-done
	allSucceeded(t, statuses, len(load.tasks()))
	pool.Reset() // connections from before the restarts are gone
	sameAsReference(t, pool, load, ref)
	retried := countLines(pl.procs["writer"].log, "message will be retried")
	if retried == 0 {
		t.Error("no write failed: the restarts missed the writer at work")
	}
	t.Logf("PostgreSQL restarted %d times mid-write; the writer retried %d results, the producer %d jobs", restarts,
		retried, countLines(pl.procs["producer"].log, "message will be retried"))
}

// TestClusterNodeLoss runs the pipeline on a 3-node NATS cluster on
// loopback (ops/nats/cluster.conf, every stream R3) and kills the node that
// leads the batches stream mid-run.
func TestClusterNodeLoss(t *testing.T) {
	t.Parallel() // mostly waiting on processes: overlap with the other fault tests
	load := defaultLoad("fc")
	load.windows = 4
	model, flags, ref := load.reference(t)

	nodes := startNATS(t, 3)
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url()
	}
	natsURL := strings.Join(urls, ",")
	js, pool, pl := stage(t, load, model, natsURL, pgtest.URL(t), 3)
	pl.standard(append(flags, "--replicas", "3")...)
	pl.startAll()

	ctx := faultContext(t, 4*time.Minute)
	done := make(chan map[faultTask]string, 1)
	go func() { done <- submit(t, ctx, pl.url, load.tasks(), 6*time.Second) }()
	time.Sleep(2 * time.Second)
	str, err := js.Stream(ctx, schemas.StreamBatches)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info: %v", err)
	}
	if got := info.Config.Replicas; got != 3 {
		t.Fatalf("batches stream has %d replicas, want 3", got)
	}
	var victim *natsNode
	for _, n := range nodes {
		if n.name == info.Cluster.Leader {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no node leads the batches stream (leader %q)", info.Cluster.Leader)
	}
	victim.kill()
	t.Logf("killed %s, leader of %s", victim.name, schemas.StreamBatches)
	statuses := <-done
	allSucceeded(t, statuses, len(load.tasks()))
	sameAsReference(t, pool, load, ref)
}
