package pipeline_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/tsdb/pgtest"
)

// handledBy reads which (task, batch) pairs a process's log says it handled.
var handledLine = regexp.MustCompile(`task_id=(\S+) batch=(\d+)`)

func handledBy(t *testing.T, path, msg string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="`+msg+`"`) {
			continue
		}
		if m := handledLine.FindStringSubmatch(line); m != nil {
			out[m[1]+"/"+m[2]] = true
		}
	}
	return out
}

// TestScaleOut runs two worker processes and two writer processes against
// one NATS and one PostgreSQL: both of each share the work (counted from
// what each process logged), every batch is handled, and the results are
// exactly those of a single-process run, each row written once.
func TestScaleOut(t *testing.T) {
	t.Parallel()
	load := defaultLoad("so")
	model, flags := faultPredictor(t)
	ref := reference(t, load, model, "", flags...)

	_, pool, pl := stage(t, load, model, embeddedNATS(t), pgtest.URL(t), 1)
	pl.add("scheduler", "scheduler", flags...)
	pl.add("producer", "producer", flags...)
	for _, name := range []string{"worker-1", "worker-2"} {
		pl.add(name, "worker", flags...)
	}
	for _, name := range []string{"writer-1", "writer-2"} {
		pl.add(name, "writer", flags...)
	}
	pl.startAll()

	ctx := faultContext(t, 3*time.Minute)
	allSucceeded(t, submit(t, ctx, pl.url, load.tasks(), 3*time.Second), len(load.tasks()))
	sameAsReference(t, pool, load, ref)

	var batches int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM regressd_task_batches WHERE batch_no >= 0`).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	for _, role := range []struct{ msg, a, b string }{
		{"batch predicted", "worker-1", "worker-2"},
		{"result written", "writer-1", "writer-2"},
	} {
		a := handledBy(t, pl.procs[role.a].log, role.msg)
		b := handledBy(t, pl.procs[role.b].log, role.msg)
		both := 0
		for k := range a {
			if b[k] {
				both++
			}
		}
		t.Logf("%s: %s %d, %s %d of %d batches (%d by both)", role.msg, role.a, len(a), role.b, len(b), batches, both)
		if len(a) == 0 || len(b) == 0 {
			t.Errorf("%s: the work was not shared (%s %d, %s %d)", role.msg, role.a, len(a), role.b, len(b))
		}
		if len(a)+len(b)-both != batches {
			t.Errorf("%s: %d distinct batches handled, want %d", role.msg, len(a)+len(b)-both, batches)
		}
		// A batch handled by both (a redelivery when a busy machine delays
		// InProgress past AckWait) is allowed: sameAsReference has already
		// shown that every row was written exactly once.
	}
}
