package eval

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Baselines maps dataset → model → score, with the suite means per model,
// and the quantile baseline of central 80% intervals.
type Baselines struct {
	Datasets  map[string]map[string]Score `json:"datasets"`
	SuiteMean map[string]float64          `json:"suite_mean_r2"`
	Intervals struct {
		Method   string                   `json:"method"`
		Datasets map[string]IntervalScore `json:"datasets"`
	} `json:"intervals_80"`
	// DataSHA256 names, per dataset, the digest of the CSV the figures were
	// computed on (recorded files have it; shared/data's baselines.json
	// does not). Where it is set, Select keeps a dataset only when its
	// file has that digest.
	DataSHA256 map[string]string `json:"data_sha256,omitempty"`
	// Source says where they were read: a file's path, or the recorded
	// copy built into this package.
	Source string `json:"-"`
}

// Score is a mean R² and RMSE over the folds, with each fold's R² where
// the file has them.
type Score struct {
	R2     float64   `json:"r2"`
	RMSE   float64   `json:"rmse"`
	FoldR2 []float64 `json:"fold_r2,omitempty"`
}

// IntervalScore is a central 80% interval's quality on the test rows: the
// share of targets inside it, its mean width and the mean Gneiting–Raftery
// interval score at α = 0.2 (in target units; lower is better).
type IntervalScore struct {
	Coverage       float64   `json:"coverage80"`
	MeanWidth      float64   `json:"mean_width"`
	Score          float64   `json:"interval_score"`
	FoldCoverage80 []float64 `json:"fold_coverage80,omitempty"`
}

// recorded holds baselines computed by scripts/baselines.sh for folds that
// shared/data has no file for (it is read-only): recorded/baselines_<folds>.json.
//
//go:embed recorded
var recorded embed.FS

// baselineFile is the name of the baselines of a kind of folds in a data
// folder: baselines.json for the fixed random splits (shared/data's),
// baselines_<kind>.json for the others.
func baselineFile(kind Folds) string {
	if kind == FoldsRandom {
		return "baselines.json"
	}
	return "baselines_" + string(kind) + ".json"
}

// LoadBaselines reads dir/baselines.json; a missing file gives nil, nil.
func LoadBaselines(dir string) (*Baselines, error) {
	return LoadFoldBaselines(dir, FoldsRandom, "")
}

// LoadFoldBaselines returns the baselines of folds of kind: from file when
// it is set; else dir's baselines.json (random) or baselines_<kind>.json;
// else the copy recorded in this package for kind, if any. A missing file
// gives nil, nil. Use Select to keep only the datasets they apply to.
func LoadFoldBaselines(dir string, kind Folds, file string) (*Baselines, error) {
	var b []byte
	var err error
	name := file
	if name == "" {
		name = filepath.Join(dir, baselineFile(kind))
	}
	b, err = os.ReadFile(name)
	if file == "" && errors.Is(err, os.ErrNotExist) {
		name = "recorded/" + baselineFile(kind)
		b, err = recorded.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("baselines: %w", err)
	}
	bl := Baselines{Source: name}
	if err := json.Unmarshal(b, &bl); err != nil {
		return nil, fmt.Errorf("baselines %s: %w", name, err)
	}
	if file == "" && name == "recorded/"+baselineFile(kind) {
		bl.Source = "built in (gpu/eval/" + name + ")"
	}
	return &bl, nil
}

// Select drops the datasets whose recorded digest differs from the data's
// (figures computed on other data must not stand beside ours) and those
// the baselines do not name. It returns the names dropped for a digest.
func (b *Baselines) Select(ds []Dataset) (mismatched []string) {
	if b == nil {
		return nil
	}
	for _, d := range ds {
		want, ok := b.DataSHA256[d.Name]
		if ok && want != d.SHA256 {
			delete(b.Datasets, d.Name)
			delete(b.Intervals.Datasets, d.Name)
			mismatched = append(mismatched, d.Name)
		}
	}
	return mismatched
}
