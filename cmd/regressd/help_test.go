package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/regressd/regressd/pipeline"
)

// runCLI runs the binary's command line in-process and returns its exit
// status and streams.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	err := m.Run(context.Background(), args)
	return exitCode(err), out.String(), errb.String() + errString(err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Asking for help is a success, on stdout, naming the command asked about.
func TestHelpExitsZeroOnStdout(t *testing.T) {
	m := &Main{}
	for name := range m.commands() {
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {"help", name}} {
			code, out, errOut := runCLI(t, args...)
			if code != 0 {
				t.Errorf("%q: exit %d, want 0 (stderr %q)", args, code, errOut)
			}
			if !strings.Contains(out, "regressd "+name) {
				t.Errorf("%q: stdout does not name 'regressd %s':\n%s", args, name, out)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "-h"}} {
		if code, out, _ := runCLI(t, args...); code != 0 || !strings.Contains(out, "Commands:") {
			t.Errorf("%q: exit %d, stdout %q", args, code, out)
		}
	}
}

func TestWrongCommandLineExitsTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // on stderr or in the error
	}{
		{nil, "Commands:"},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"keys"}, "regressd keys create NAME"},
		{[]string{"worker", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"trigger", "bogus"}, `unknown trigger action "bogus"`},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: stderr %q, want %q", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
	}
}

// Each command lists only the flags it uses.
func TestHelpListsOnlyTheCommandsFlags(t *testing.T) {
	for _, tc := range []struct {
		cmd       string
		want, not []string
	}{
		{"run", []string{"-rate-per-minute", "-predictor", "-nats-listen", "-gateway-addr", "-wait-timeout"}, nil},
		{"demo", []string{"-model", "-data-dir"}, []string{"-http-addr", "-gateway-addr", "-rate-per-minute", "-nats-listen"}},
		{"scheduler", []string{"-wait-timeout", "-http-addr", "-nats-url"}, []string{"-rate-per-minute", "-max-body-bytes", "-predictor", "-concurrency", "-device-memory"}},
		{"producer", []string{"-concurrency", "-database-url"}, []string{"-rate-per-minute", "-predictor", "-gateway-url", "-wait-timeout", "-gateway-addr"}},
		{"worker", []string{"-predictor", "-gateway-url", "-device-memory"}, []string{"-database-url", "-rate-per-minute", "-max-body-bytes", "-wait-timeout"}},
		{"writer", []string{"-database-url", "-concurrency"}, []string{"-rate-per-minute", "-predictor", "-device-memory", "-gateway-url"}},
		{"gateway", []string{"-rate-per-minute", "-max-body-bytes", "-gateway-addr"}, []string{"-nats-url", "-predictor", "-concurrency", "-wait-timeout"}},
		{"keys", []string{"-data-dir", "-database-url"}, []string{"-nats-url", "-http-addr", "-gateway-addr", "-rate-per-minute", "-replicas"}},
		{"dlq", []string{"-nats-url", "-data-dir"}, []string{"-database-url", "-http-addr", "-nats-listen", "-rate-per-minute"}},
		{"replay", []string{"-nats-url", "-trigger"}, []string{"-database-url", "-http-addr", "-nats-listen", "-rate-per-minute"}},
	} {
		_, out, _ := runCLI(t, tc.cmd, "-h")
		if !strings.Contains(out, "Usage: regressd "+tc.cmd) && !strings.Contains(out, "regressd "+tc.cmd+" ") {
			t.Errorf("%s -h: usage does not name the command:\n%s", tc.cmd, out)
		}
		for _, f := range tc.want {
			if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
				t.Errorf("%s -h does not list %s", tc.cmd, f)
			}
		}
		for _, f := range tc.not {
			if strings.Contains(out, "  "+f+" ") || strings.Contains(out, "  "+f+"\n") {
				t.Errorf("%s -h lists %s, which it does not use", tc.cmd, f)
			}
		}
	}
}

// A role takes every role's flags, so one command line starts any of them.
func TestRolesTakeEveryRolesFlags(t *testing.T) {
	args := []string{"--nats-url", "nats://127.0.0.1:1", "--database-url", "postgres://x@127.0.0.1:1/y", "--data-dir", t.TempDir(),
		"--http-addr", "127.0.0.1:0", "--gateway-addr", "127.0.0.1:0", "--concurrency", "2", "--wait-timeout", "5s",
		"--predictor", "local", "--rate-per-minute", "60", "--nats-listen", "127.0.0.1:0"}
	for _, r := range pipeline.AllRoles {
		rc := &roleCommand{m: &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}, roles: []pipeline.Role{r}}
		if err := rc.flags().Parse(args); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
}

// A gateway answers both "error" and "message" with the same text; the
// trigger client says it once.
func TestTriggerErrorSaidOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"no such endpoint; the gateway serves POST /predict","message":"no such endpoint; the gateway serves POST /predict","code":"not_found"}`))
	}))
	defer srv.Close()
	code, _, errOut := runCLI(t, "trigger", "list", "--server", srv.URL)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if n := strings.Count(errOut, "no such endpoint"); n != 1 {
		t.Errorf("message said %d times: %q", n, errOut)
	}
}

// Commands that only use a deployment's store refuse a data dir that holds
// none rather than create an empty one the running server does not know.
func TestStoreCommandsNeedAnExistingDataDir(t *testing.T) {
	for _, sub := range []string{"", "empty"} {
		dir := t.TempDir()
		dataDir := dir + "/regressd-data"
		if sub != "" {
			dataDir = dir + "/" + sub
			if err := os.Mkdir(dataDir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{
			{"keys", "create", "alice"},
			{"keys", "list"},
			{"dlq", "list"},
			{"replay", "--trigger", "t", "--since", "1d"},
			{"database-url"},
		} {
			args = append(args, "--data-dir", dataDir)
			code, _, errOut := runCLI(t, args...)
			if code != 1 || !strings.Contains(errOut, "--data-dir (or REGRESSD_DATA_DIR) of the running server") || !strings.Contains(errOut, dataDir) {
				t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
			}
			ents, _ := os.ReadDir(dir)
			if sub == "" && len(ents) != 0 {
				t.Errorf("%q created %s", args, ents[0].Name())
			}
			if ents, _ := os.ReadDir(dataDir); sub != "" && len(ents) != 0 {
				t.Errorf("%q created %s in the data dir", args, ents[0].Name())
			}
		}
	}
}

// No command's help prints a secret from the environment: secret flags
// take their variables after parsing, never as defaults, and say at most
// that the variable is set.
func TestHelpPrintsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"REGRESSD_DATABASE_URL": "postgres://regressd:pw-canary-1@db.example:5432/metrics",
		"REGRESSD_NATS_URL":     "nats://tok-canary-2@nats.example:4222",
		"REGRESSD_AUTH_TOKEN":   "tok-canary-3",
		"REGRESSD_AUTH_TOKENS":  "tok-canary-4,tok-canary-5",
		"REGRESSD_SECRET":       "secret-canary-6-0123456789",
		"SERVICE_API_KEY":       "key-canary-7",
		"REGRESSD_GATEWAY_URL":  "https://user:gw-canary-8@gw.example",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	m := &Main{}
	runs := [][]string{{"help"}, {"-h"}}
	for name := range m.commands() {
		runs = append(runs, []string{name, "-h"}, []string{name, "--help"}, []string{"help", name})
	}
	for _, args := range runs {
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%q: exit %d", args, code)
		}
		for k, v := range secrets {
			for _, part := range []string{v, "canary"} {
				if strings.Contains(out+errOut, part) {
					t.Errorf("%q prints %s's value (%q):\n%s%s", args, k, part, out, errOut)
				}
			}
		}
	}
	// The flag says its variable is set, and the value is used.
	if _, out, _ := runCLI(t, "run", "-h"); !strings.Contains(out, "REGRESSD_DATABASE_URL: set") {
		t.Errorf("run -h does not say REGRESSD_DATABASE_URL is set:\n%s", out)
	}
	rc := &roleCommand{m: &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}, roles: pipeline.AllRoles}
	fs := rc.flags()
	if err := rc.m.parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	if rc.common.DatabaseURL != secrets["REGRESSD_DATABASE_URL"] || rc.common.NATSURL != secrets["REGRESSD_NATS_URL"] || rc.gatewayURL != secrets["REGRESSD_GATEWAY_URL"] {
		t.Errorf("secret flags not filled from the environment: %q %q %q", rc.common.DatabaseURL, rc.common.NATSURL, rc.gatewayURL)
	}
	if err := rc.m.parse(fs, []string{"--database-url", "postgres://other"}); err != nil || rc.common.DatabaseURL != "postgres://other" {
		t.Errorf("a flag given loses to the environment: %q %v", rc.common.DatabaseURL, err)
	}
}
