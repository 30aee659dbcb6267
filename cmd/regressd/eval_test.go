package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModelsCommand(t *testing.T) {
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := (&modelsCommand{m: m}).Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"regressd/model-2l", "regressd/model-4l", "regressd/model-4l-thinking", "(default)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("models output lacks %q:\n%s", want, out.String())
		}
	}
	if err := (&modelsCommand{m: m}).Run(context.Background(), []string{"extra"}); err == nil {
		t.Error("models with an argument: want an error")
	}
}

func TestEvalCommandJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on two datasets × five splits")
	}
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	dir := filepath.Join("..", "..", "testdata", "engine")
	if err := (&evalCommand{m: m}).Run(context.Background(), []string{"--data", dir, "--json", "--model", "regressd/model-2l"}); err != nil {
		t.Fatalf("eval: %v\n%s", err, errb.String())
	}
	var got struct {
		SuiteMeanR2 float64 `json:"suite_mean_r2"`
		Datasets    []struct {
			Name      string                        `json:"name"`
			R2        float64                       `json:"r2"`
			RMSE      float64                       `json:"rmse"`
			Baselines map[string]map[string]float64 `json:"baselines"`
		} `json:"datasets"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("eval --json output is not JSON: %v\n%s", err, out.String())
	}
	if len(got.Datasets) != 2 {
		t.Fatalf("datasets = %d, want 2", len(got.Datasets))
	}
	// Far above predicting the mean (R² 0); the accuracy floors proper are
	// in gpu's tests.
	if got.SuiteMeanR2 < 0.6 {
		t.Errorf("suite_mean_r2 = %.4f, want ≥ 0.6", got.SuiteMeanR2)
	}
	if _, ok := got.Datasets[0].Baselines["KNN10"]; !ok {
		t.Errorf("baselines not carried: %+v", got.Datasets[0])
	}
	if !strings.Contains(errb.String(), "10/10") {
		t.Errorf("progress bar did not reach 10/10: %q", errb.String())
	}
}

func TestEvalCommandBadInputs(t *testing.T) {
	empty := t.TempDir()
	badSplit := t.TempDir()
	os.WriteFile(filepath.Join(badSplit, "a.csv"), []byte("x,y\n1,2\n2,3\n3,5\n"), 0o644)
	os.Mkdir(filepath.Join(badSplit, "splits"), 0o755)
	os.WriteFile(filepath.Join(badSplit, "splits", "a.csv"), []byte("seed0\n1\n0\n2\n"), 0o644)
	noSplit := t.TempDir()
	os.WriteFile(filepath.Join(noSplit, "a.csv"), []byte("x,y\n1,2\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no data flag", nil, "--data DIR is required"},
		{"missing dir", []string{"--data", filepath.Join(empty, "nope")}, "no such file"},
		{"no csv", []string{"--data", empty}, "no *.csv files"},
		{"bad split", []string{"--data", badSplit}, "is not 0 or 1"},
		{"no split file", []string{"--data", noSplit}, "split file"},
		{"unknown model", []string{"--data", empty, "--model", "x/y"}, "unknown model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := (&evalCommand{m: &Main{Stdout: &out, Stderr: &errb}}).Run(context.Background(), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}
