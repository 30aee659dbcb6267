package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/regressd/regressd/tsdb/pgtest"
	"github.com/regressd/regressd/worker"
)

// Every role runs a task and stops: Close joins every goroutine the
// pipeline started (roles, their consumers and committers, the servers),
// and closes the bus, the embedded NATS server and the pool.
func TestStartStopLeavesNoGoroutine(t *testing.T) {
	dbURL := pgtest.URL(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	p, err := Start(ctx, Config{Stores: Stores{DataDir: t.TempDir(), DatabaseURL: dbURL}, Roles: AllRoles,
		HTTPAddr: "127.0.0.1:0", GatewayAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Pool.Exec(ctx, `CREATE TABLE leak ("time" timestamptz NOT NULL, x double precision, y double precision);
		INSERT INTO leak SELECT timestamptz '2026-01-01' + i * interval '1 hour', i, CASE WHEN i % 5 = 0 THEN NULL ELSE 2 * i END
		FROM generate_series(1, 60) AS i`); err != nil {
		t.Fatal(err)
	}
	body := `{"trigger_name":"leak","trigger_specification":"request:leak","trigger_arguments":"measurement=leak,field=y,feature_fields=x,model=regressd/model-2l,min_history=5,predict_batch_size=4"}`
	if res, err := http.Post(p.URL()+"/api/v3/configure/processing_engine_trigger", "application/json", strings.NewReader(body)); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create trigger: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/api/v3/engine/leak", strings.NewReader(`{"start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-04T00:00:00Z"}`))
	req.Header.Set("X-Service-Api-Key", "k")
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result struct {
			Status  string
			Written int
		}
	}
	json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if out.Result.Status != "success" || out.Result.Written != 12 {
		t.Fatalf("task: %+v, want success with 12 rows written", out)
	}
	http.DefaultClient.CloseIdleConnections()
	p.Close()
}

// 'regressd run' refuses the benchmark's model: only the bench's own check
// (Config.Models) accepts it.
func TestRunRefusesTheBenchModel(t *testing.T) {
	if err := modelCheck(false)(worker.BenchModel); err == nil {
		t.Fatalf("the pipeline accepts the benchmark model %s", worker.BenchModel)
	}
	if err := modelCheck(true)("vendor/any-model"); err != nil {
		t.Fatalf("with a gateway, a slug is routable: %v", err)
	}
}

// Validate says every problem at once.
func TestValidateSaysEveryProblem(t *testing.T) {
	c := Config{Roles: []Role{Worker, "cook"}, HTTPAddr: "0.0.0.0:8181", Predictor: PredictRemote}
	c.setDefaults()
	err := c.Validate()
	for _, want := range []string{`unknown role "cook"`, "REGRESSD_AUTH_TOKENS", "--predictor remote needs --gateway-url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	c = Config{Roles: AllRoles, AuthTokens: []string{"t"}, HTTPAddr: "0.0.0.0:8181"}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}
