package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

func TestTriggerCommands(t *testing.T) {
	e := pipelinetest.Start(t)
	var out bytes.Buffer
	cli := func(args ...string) error {
		out.Reset()
		m := &Main{Stdout: &out, Stderr: &out}
		return m.Run(context.Background(), append([]string{"trigger", "--server", e.URL}, args...))
	}
	if err := cli("create", "weather", "--spec", "every:15m", "--args", "measurement=w,field=y,feature_fields=x1 x2,model="+pipelinetest.DefaultModel()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("create on a missing table: %v", err)
	}
	if err := cli("show", "weather"); err == nil {
		t.Fatal("a refused trigger was stored")
	}
	e.MakeTable(pipelinetest.SeriesSpec{Table: "w", Start: pipelinetest.T0, Rows: 10})
	if err := cli("create", "weather", "--spec", "every:15m", "--args", "measurement=w,field=y,feature_fields=x1 x2,model="+pipelinetest.DefaultModel()); err != nil {
		t.Fatalf("create: %v: %s", err, out.String())
	}
	if err := cli("create", "weather", "--spec", "every:15m", "--args", "measurement=w,field=y,feature_fields=x1,model="+pipelinetest.DefaultModel()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate create: %v", err)
	}
	err := cli("create", "bad", "--spec", "every:15m", "--args", "measurement=w,field=y,min_history=0,colour=red")
	for _, want := range []string{"feature_fields", "model", "min_history", `unknown argument "colour"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad create: %v lacks %q", err, want)
		}
	}
	if err := cli("list"); err != nil || !strings.Contains(out.String(), "weather") || !strings.Contains(out.String(), "enabled") {
		t.Fatalf("list: %v %s", err, out.String())
	}
	if err := cli("disable", "weather"); err != nil {
		t.Fatal(err)
	}
	if err := cli("show", "weather"); err != nil || !strings.Contains(out.String(), "state:    disabled") || !strings.Contains(out.String(), "feature_fields=x1 x2") {
		t.Fatalf("show: %v %s", err, out.String())
	}
	if err := cli("enable", "weather"); err != nil {
		t.Fatal(err)
	}
	if err := cli("delete", "weather"); err != nil {
		t.Fatal(err)
	}
	if err := cli("show", "weather"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("show after delete: %v", err)
	}
	if err := cli("frobnicate"); err == nil || !strings.Contains(err.Error(), "unknown trigger action") {
		t.Fatalf("unknown action: %v", err)
	}
	// --server as host:port, as a listen address is written, is http.
	hostPort := &Main{Stdout: &out, Stderr: &out}
	out.Reset()
	if err := hostPort.Run(context.Background(), []string{"trigger", "--server", strings.TrimPrefix(e.URL, "http://"), "list"}); err != nil {
		t.Fatalf("--server host:port: %v", err)
	}
	bad := &Main{Stdout: &out, Stderr: &out}
	if err := bad.Run(context.Background(), []string{"trigger", "--server", "http://127.0.0.1:1", "list"}); err == nil || !strings.Contains(err.Error(), "cannot reach regressd") {
		t.Fatalf("unreachable server: %v", err)
	}
}
