// Package eval scores a regressor on a folder of datasets laid out like
// shared/data: <name>.csv files, their fixed train/test splits in
// splits/<name>.csv, an optional manifest.json naming features and target, and
// an optional baselines.json of reference scores.
package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Dataset is one table with its fixed splits.
type Dataset struct {
	Name     string
	Features []string
	Target   string
	X        [][]float64 // NaN marks a missing cell
	Y        []float64
	// Test[s][i] is true when row i is a test row of split s.
	Test [][]bool
	// SHA256 is the hex digest of the CSV file, which recorded baselines
	// name so that they apply only to the data they were computed on.
	SHA256 string
	// Notes say how the data was read where it was not plain (stray text
	// in a numeric column).
	Notes []string
}

// manifestEntry is the part of manifest.json this package reads.
type manifestEntry struct {
	Name       string   `json:"name"`
	File       string   `json:"file"`
	Features   []string `json:"features"`
	Target     string   `json:"target"`
	TimeColumn *string  `json:"time_column"`
}

// Load reads every *.csv in dir with its split file (LoadFolds with
// FoldsRandom).
func Load(dir string) ([]Dataset, error) { return LoadFolds(dir, FoldsRandom) }

// LoadFolds reads every *.csv in dir with the folds of kind: the fixed
// splits of splits/<name>.csv (FoldsRandom), or five contiguous blocks of
// rows in file order (FoldsBlocks, which needs no split file). Without a
// manifest entry the last column is the target and every other column
// except one named "time" is a feature. A feature column holding text is
// one-hot encoded (Dataset.Features then names its indicators
// "column=value").
func LoadFolds(dir string, kind Folds) ([]Dataset, error) {
	if err := kind.Validate(); err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("data dir %s is not a directory", dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.csv files in %s", dir)
	}
	sort.Strings(files)
	manifest := map[string]manifestEntry{}
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil {
		var entries []manifestEntry
		if err := json.Unmarshal(b, &entries); err != nil {
			return nil, fmt.Errorf("manifest.json: %w", err)
		}
		for _, e := range entries {
			manifest[e.File] = e
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	var out []Dataset
	for _, f := range files {
		base := filepath.Base(f)
		d, err := loadOne(dir, base, manifest[base], kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", base, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func readCSVFile(path string) ([]string, [][]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	return readCSV(fh)
}

func readCSV(in io.Reader) ([]string, [][]string, error) {
	br := bufio.NewReader(in)
	if bom, err := br.Peek(3); err == nil && string(bom) == "\ufeff" {
		br.Discard(3) // a UTF-8 byte order mark, as spreadsheets write
	}
	r := csv.NewReader(br)
	header, err := r.Read()
	if err == io.EOF {
		return nil, nil, errors.New("empty file")
	}
	if err != nil {
		return nil, nil, err
	}
	var rows [][]string
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, rec)
	}
	return header, rows, nil
}

func loadOne(dir, file string, m manifestEntry, kind Folds) (Dataset, error) {
	raw, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return Dataset{}, err
	}
	header, rows, err := readCSV(bytes.NewReader(raw))
	if err != nil {
		return Dataset{}, err
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	sum := sha256.Sum256(raw)
	d := Dataset{Name: strings.TrimSuffix(file, ".csv"), Features: m.Features, Target: m.Target, SHA256: hex.EncodeToString(sum[:])}
	if d.Target == "" {
		d.Target = header[len(header)-1]
		d.Features = nil
		for _, h := range header[:len(header)-1] {
			if h != "time" {
				d.Features = append(d.Features, h)
			}
		}
	}
	ti, ok := col[d.Target]
	if !ok {
		return Dataset{}, fmt.Errorf("target column %q not in header", d.Target)
	}
	if len(d.Features) == 0 {
		return Dataset{}, errors.New("no feature columns")
	}
	for _, f := range d.Features {
		if f == d.Target {
			return Dataset{}, fmt.Errorf("the target %q is also listed as a feature", f)
		}
	}
	var cols []column
	var names []string
	for _, f := range d.Features {
		c, ok := col[f]
		if !ok {
			return Dataset{}, fmt.Errorf("feature column %q not in header", f)
		}
		fc, err := newColumn(f, c, rows)
		if err != nil {
			return Dataset{}, err
		}
		if fc.stray > 0 {
			d.Notes = append(d.Notes, fmt.Sprintf("column %q: %d cell(s) that are not numbers read as missing", f, fc.stray))
		}
		cols = append(cols, fc)
		names = append(names, fc.names()...)
	}
	d.Features = names
	// A row with no target value (empty, NA, NaN) can neither be scored nor
	// teach: it is left out, and a split file, which has a line for every
	// row of the data, loses the same lines.
	keep := make([]bool, len(rows))
	for r, rec := range rows {
		yv, err := cell(rec, ti)
		if err != nil {
			return Dataset{}, fmt.Errorf("row %d: target %q is not a number", r+2, rec[ti])
		}
		if math.IsNaN(yv) || math.IsInf(yv, 0) {
			continue
		}
		keep[r] = true
		x := make([]float64, 0, len(names))
		for _, c := range cols {
			x = c.appendRow(x, rec)
		}
		d.X = append(d.X, x)
		d.Y = append(d.Y, yv)
	}
	if skipped := len(rows) - len(d.X); skipped > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d row(s) with no target value left out", skipped))
	}
	if len(d.X) == 0 {
		return Dataset{}, errors.New("no data rows with a target value")
	}
	if kind == FoldsBlocks {
		if len(d.X) < blockFolds {
			return Dataset{}, fmt.Errorf("%d rows cannot make %d blocks", len(d.X), blockFolds)
		}
		d.Test = BlockFolds(len(d.X), blockFolds)
	} else if d.Test, err = loadSplits(filepath.Join(dir, "splits", file), len(rows)); err != nil {
		return Dataset{}, err
	} else {
		for s, test := range d.Test {
			d.Test[s] = keepRows(test, keep)
		}
	}
	// R² compares errors with the test targets' spread: a split without
	// one has no R².
	for s, test := range d.Test {
		var first float64
		n, spread := 0, false
		for i, t := range test {
			if t {
				if n == 0 {
					first = d.Y[i]
				}
				spread = spread || d.Y[i] != first
				n++
			}
		}
		if !spread {
			return Dataset{}, fmt.Errorf("split %d has %d test row(s), all with target %g: R² is undefined without a spread of test targets", s, n, first)
		}
	}
	return d, nil
}

// maxLevels bounds the distinct values of a text feature column.
const maxLevels = 64

// column is one feature column of a CSV: numbers, or text one-hot encoded
// over its sorted distinct values (a missing text cell is missing in every
// one of its indicators).
type column struct {
	name   string
	index  int
	levels []string // nil for a numeric column
	stray  int      // a numeric column's cells that were not numbers (missing)
}

// newColumn reads column c of rows: numeric if at least 95% of its present
// cells parse (the others are then missing, counted in stray), text
// otherwise.
func newColumn(name string, c int, rows [][]string) (column, error) {
	fc := column{name: name, index: c}
	seen := map[string]bool{}
	numbers, texts := 0, 0
	for _, rec := range rows {
		v, ok := textCell(rec, c)
		if !ok {
			continue
		}
		seen[v] = true
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			texts++
		} else {
			numbers++
		}
	}
	// A few stray cells (a typo, "n/a") in a column of numbers are missing;
	// more, and the column is a text one (category codes among them).
	if texts*20 <= numbers+texts {
		fc.stray = texts
		return fc, nil
	}
	if len(seen) > maxLevels {
		return column{}, fmt.Errorf("feature column %q is text with %d distinct values (at most %d are one-hot encoded): leave it out of the features in manifest.json", name, len(seen), maxLevels)
	}
	for v := range seen {
		fc.levels = append(fc.levels, v)
	}
	sort.Strings(fc.levels)
	return fc, nil
}

func (c column) names() []string {
	if c.levels == nil {
		return []string{c.name}
	}
	out := make([]string, len(c.levels))
	for i, l := range c.levels {
		out[i] = c.name + "=" + l
	}
	return out
}

// appendRow appends the column's values of rec to x.
func (c column) appendRow(x []float64, rec []string) []float64 {
	if c.levels == nil {
		v, err := cell(rec, c.index)
		if err != nil {
			v = math.NaN() // a stray text cell in a numeric column
		}
		return append(x, v)
	}
	v, ok := textCell(rec, c.index)
	for _, l := range c.levels {
		switch {
		case !ok:
			x = append(x, math.NaN())
		case v == l:
			x = append(x, 1)
		default:
			x = append(x, 0)
		}
	}
	return x
}

// textCell is a cell's trimmed text; false when it is missing.
func textCell(rec []string, i int) (string, bool) {
	if i >= len(rec) {
		return "", false
	}
	s := strings.TrimSpace(rec[i])
	return s, !missingText(s)
}

func missingText(s string) bool {
	return s == "" || strings.EqualFold(s, "na") || strings.EqualFold(s, "nan")
}

// cell parses a number; an empty cell is missing (NaN).
func cell(rec []string, i int) (float64, error) {
	if i >= len(rec) {
		return math.NaN(), nil
	}
	s := strings.TrimSpace(rec[i])
	if missingText(s) {
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("cell %q is not a number", s)
	}
	return v, nil
}

// keepRows returns the entries of mask whose rows are kept.
func keepRows(mask, keep []bool) []bool {
	out := make([]bool, 0, len(mask))
	for i, m := range mask {
		if keep[i] {
			out = append(out, m)
		}
	}
	return out
}

func loadSplits(path string, rows int) ([][]bool, error) {
	header, recs, err := readCSVFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("split file: %w (random folds read fixed splits from splits/<name>.csv; --folds blocks needs none)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("split file: %w", err)
	}
	if len(recs) != rows {
		return nil, fmt.Errorf("split file %s has %d rows, the data has %d", path, len(recs), rows)
	}
	test := make([][]bool, len(header))
	for s := range header {
		test[s] = make([]bool, rows)
		var nTest int
		for i, rec := range recs {
			if s >= len(rec) {
				return nil, fmt.Errorf("split file %s row %d: missing column %s", path, i+2, header[s])
			}
			switch strings.TrimSpace(rec[s]) {
			case "1":
				test[s][i] = true
				nTest++
			case "0":
			default:
				return nil, fmt.Errorf("split file %s row %d: %q is not 0 or 1", path, i+2, rec[s])
			}
		}
		if nTest == 0 || nTest == rows {
			return nil, fmt.Errorf("split file %s: split %s has no train or no test rows", path, header[s])
		}
	}
	if len(test) == 0 {
		return nil, fmt.Errorf("split file %s has no split columns", path)
	}
	return test, nil
}
