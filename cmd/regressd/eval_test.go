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
	for _, want := range []string{"regressd/model-2l", "regressd/model-4l", "regressd/model-4l-thinking", "(default)", "synthefy/nori-30m -> regressd/model-4l", "nori-6m -> regressd/model-2l"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("models output lacks %q:\n%s", want, out.String())
		}
	}
	if err := (&modelsCommand{m: m}).Run(context.Background(), []string{"extra"}); err == nil {
		t.Error("models with an argument: want an error")
	}
}

// engineData is the two-dataset folder the eval tests score.
var engineData = filepath.Join("..", "..", "testdata", "engine")

// runEval runs `regressd eval` with args, failing the test on an error.
func runEval(t *testing.T, args ...string) (stdout, stderr *bytes.Buffer) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := (&evalCommand{m: &Main{Stdout: &out, Stderr: &errb}}).Run(context.Background(), args); err != nil {
		t.Fatalf("eval %q: %v\n%s", args, err, errb.String())
	}
	return &out, &errb
}

func TestEvalCommandJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on two datasets × five splits")
	}
	out, errb := runEval(t, "--data", engineData, "--json", "--model", "regressd/model-2l")
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
	var iv struct {
		Folds           string  `json:"folds"`
		SuiteCoverage80 float64 `json:"suite_coverage80"`
		SuiteRatio      float64 `json:"suite_interval_score_ratio"`
		Datasets        []struct {
			Intervals struct {
				Coverage float64 `json:"coverage80"`
				Width    float64 `json:"mean_width"`
				Score    float64 `json:"interval_score"`
			} `json:"intervals_80"`
			Baseline *struct {
				Score float64 `json:"interval_score"`
			} `json:"baseline_intervals_80"`
		} `json:"datasets"`
	}
	if err := json.Unmarshal(out.Bytes(), &iv); err != nil {
		t.Fatal(err)
	}
	// A calibrated 80% band on a few hundred test rows: nowhere near 0 or 1.
	if iv.Folds != "random" || iv.SuiteCoverage80 < 0.65 || iv.SuiteCoverage80 > 0.95 {
		t.Errorf("folds %q, suite coverage %.3f: want random and about 0.8", iv.Folds, iv.SuiteCoverage80)
	}
	for _, d := range iv.Datasets {
		if !(d.Intervals.Width > 0) || !(d.Intervals.Score >= d.Intervals.Width) || d.Baseline == nil {
			t.Errorf("intervals %+v, baseline %+v: want a positive width, a score at least the width, and the baseline's beside", d.Intervals, d.Baseline)
		}
	}
	if !(iv.SuiteRatio > 0) {
		t.Errorf("suite interval-score ratio %v", iv.SuiteRatio)
	}
}

// TestEvalCommandBlocks scores contiguous blocks and prints each fold's R²
// beside the best baseline of the fold, from the baselines recorded with
// the build (testdata/engine's files are shared/data's, digest for digest).
func TestEvalCommandBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on two datasets × five folds")
	}
	out, _ := runEval(t, "--data", engineData, "--folds", "blocks", "--model", "regressd/model-2l")
	text := out.String()
	for _, want := range []string{"blocks folds", "fold 5", "/ -0.165 RF", "80% intervals", "recorded/baselines_blocks.json", "interval score below the baseline's on"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// A baselines file for other data (another digest) is left out, said.
	other := filepath.Join(t.TempDir(), "b.json")
	os.WriteFile(other, []byte(`{"datasets": {"airquality": {"RF": {"r2": 0.5}}}, "data_sha256": {"airquality": "00"}}`), 0o644)
	out, errb := runEval(t, "--data", engineData, "--folds", "blocks", "--model", "regressd/model-2l", "--baselines", other, "--json")
	if !strings.Contains(errb.String(), "baselines left out for airquality") || strings.Contains(out.String(), `"RF"`) {
		t.Errorf("baselines of other data not left out:\n%s\n%s", errb.String(), out.String())
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
		{"unknown folds", []string{"--data", empty, "--folds", "odd"}, `unknown folds "odd"`},
		{"missing baselines file", []string{"--data", engineData, "--folds", "blocks", "--baselines", filepath.Join(empty, "nope.json")}, "no such file"},
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
