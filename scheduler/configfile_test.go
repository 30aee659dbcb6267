package scheduler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfigFileSuppliesEveryArgument(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "conf/sensors.toml", `
measurement = "sensors"
field = "pressure"
feature_fields = ["air temp", "humidity"]
model = "v/m"
window = "90min"
min_history = 3
skip_existing = false
start_time = 2026-01-01T00:00:00Z
end_time = "2026-01-02 00:00:00"
output_measurement = "filled"
target_database = "predictions"

[tags]
site = "North Yard"
`)
	args, fromFile, err := ExpandArgs(map[string]string{ArgConfigFile: "conf/sensors.toml"}, dir)
	if err != nil || !fromFile {
		t.Fatalf("expand: %v (from file %v)", err, fromFile)
	}
	run, err := ResolveRun(args, false, nil)
	if err != nil {
		t.Fatalf("resolve %v: %v", args, err)
	}
	a := run.Args
	if len(a.FeatureFields) != 2 || a.FeatureFields[0] != "air temp" || a.Tags["site"] != "North Yard" ||
		time.Duration(a.Window) != 90*time.Minute || a.MinHistory != 3 || a.SkipExisting ||
		a.OutputMeasurement != "filled" || a.OutputSchema != "predictions" {
		t.Fatalf("args %+v", a)
	}
	if run.Start == nil || !run.Start.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) || run.End == nil || run.End.Day() != 2 {
		t.Fatalf("window %v %v", run.Start, run.End)
	}
	// A request trigger's body cannot add to a file's arguments.
	tr := Trigger{Name: "f", Spec: "request:f", Args: map[string]string{ArgConfigFile: "conf/sensors.toml"}}
	if err := tr.Validate(nil, dir); err != nil {
		t.Fatalf("validate: %v", err)
	}
}

func TestConfigFileRules(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFile(t, outside, "secret.toml", `measurement = "m"`)
	writeFile(t, dir, "nested.toml", `config_file_path = "other.toml"`)
	writeFile(t, dir, "retired.toml", "measurement = \"m\"\nfield = \"y\"\nfeature_fields = \"a\"\nmodel = \"v/m\"\nhorizon = 5\n")
	writeFile(t, dir, "bad.toml", `measurement = `)
	writeFile(t, dir, "partial.toml", `measurement = "m"`)
	if err := os.Symlink(filepath.Join(outside, "secret.toml"), filepath.Join(dir, "link.toml")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args map[string]string
		dir  string
		want string
	}{
		{map[string]string{ArgConfigFile: "a.toml", "window": "1d"}, dir, "cannot be combined with the inline argument(s) window"},
		{map[string]string{ArgConfigFile: "a.toml"}, "", "no configuration directory is set"},
		{map[string]string{ArgConfigFile: "../" + filepath.Base(outside) + "/secret.toml"}, dir, "must be a relative path inside"},
		{map[string]string{ArgConfigFile: filepath.Join(outside, "secret.toml")}, dir, "must be a relative path inside"},
		{map[string]string{ArgConfigFile: "link.toml"}, dir, "link.toml"},
		{map[string]string{ArgConfigFile: "missing.toml"}, dir, "no such file"},
		{map[string]string{ArgConfigFile: "nested.toml"}, dir, "cannot name another file"},
		{map[string]string{ArgConfigFile: "bad.toml"}, dir, "not valid TOML"},
	}
	for _, tc := range cases {
		_, _, err := ExpandArgs(tc.args, tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err=%v, want %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Errorf("%v: the error names the configuration directory: %v", tc.args, err)
		}
	}
	// What the file says is checked as inline arguments are.
	for name, want := range map[string]string{"retired.toml": `"horizon" is not accepted`, "partial.toml": `"field" is required`} {
		tr := Trigger{Name: "f", Spec: "request:f", Args: map[string]string{ArgConfigFile: name}}
		if err := tr.Validate(nil, dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err=%v, want %q", name, err, want)
		}
	}
}
