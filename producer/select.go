package producer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/regressd/regressd/schemas"
)

// window gives typed access to a record read by tsdb.ReadWindow.
type window struct {
	rec      arrow.RecordBatch
	times    *array.Timestamp
	tags     []*array.String
	target   *array.Float64
	features []*array.Float64
}

func newWindow(rec arrow.RecordBatch, nTags, nFeatures int) window {
	w := window{rec: rec, times: rec.Column(0).(*array.Timestamp)}
	for i := 0; i < nTags; i++ {
		w.tags = append(w.tags, rec.Column(1+i).(*array.String))
	}
	w.target = rec.Column(1 + nTags).(*array.Float64)
	for i := 0; i < nFeatures; i++ {
		w.features = append(w.features, rec.Column(2+nTags+i).(*array.Float64))
	}
	return w
}

func (w window) rows() int { return int(w.rec.NumRows()) }

// featuresPresent reports whether every feature of row i has a value.
func (w window) featuresPresent(i int) bool {
	for _, f := range w.features {
		if f.IsNull(i) {
			return false
		}
	}
	return true
}

// tagValue is row i's value of tag j; a NULL tag and an empty one are
// both no value ("" returned, ok false).
func (w window) tagValue(i, j int) (string, bool) {
	t := w.tags[j]
	if t.IsNull(i) || t.Value(i) == "" {
		return "", false
	}
	return t.Value(i), true
}

// seriesKey is row i's tag combination; a tag with no value (NULL or
// empty) is left out, as the plugin does.
func (w window) seriesKey(i int, names []string) string {
	var b strings.Builder
	for j := range w.tags {
		v, ok := w.tagValue(i, j)
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(names[j])
		b.WriteByte('=')
		b.WriteString(v)
	}
	if b.Len() == 0 {
		return "<no tags>"
	}
	return b.String()
}

// series returns the single tag combination of the rows the run would use
// (every feature present: examples and queries), or an error naming up to
// three of those found. Rows the run leaves alone do not count, and
// neither do tags with no value.
func (w window) series(names []string) (map[string]string, error) {
	if len(w.tags) == 0 {
		return nil, nil
	}
	first := -1
	seen := map[string]bool{}
	var order []string
	for i := 0; i < w.rows(); i++ {
		if !w.featuresPresent(i) {
			continue
		}
		if first < 0 {
			first = i
			k := w.seriesKey(i, names)
			seen[k], order = true, append(order, k)
			continue
		}
		if w.sameTags(i, first) {
			continue // the common case, without building a key
		}
		if k := w.seriesKey(i, names); !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
	}
	if first < 0 {
		return nil, nil
	}
	if len(order) > 1 {
		shown := order[:min(3, len(order))]
		return nil, fmt.Errorf("the window holds %d series (%s%s); a run fits one series: set tags to select one, e.g. tags=%s",
			len(order), strings.Join(shown, "; "), map[bool]string{true: "; …", false: ""}[len(order) > 3], schemas.FormatTags(w.hintTags(first, names)))
	}
	return w.tagsOf(first, names), nil
}

// sameTags reports whether rows i and k have the same tag values (no
// value, NULL or empty, equal to no value).
func (w window) sameTags(i, k int) bool {
	for j := range w.tags {
		a, _ := w.tagValue(i, j)
		b, _ := w.tagValue(k, j)
		if a != b {
			return false
		}
	}
	return true
}

// hintTags are the tags that select row i's series: its values, and an
// empty value (no value: NULL or empty) for the tag columns it has none in
// while another row of the window has one.
func (w window) hintTags(i int, names []string) map[string]string {
	out := w.tagsOf(i, names)
	for j := range w.tags {
		if _, ok := out[names[j]]; ok {
			continue
		}
		for k := 0; k < w.rows(); k++ {
			if _, ok := w.tagValue(k, j); ok {
				out[names[j]] = ""
				break
			}
		}
	}
	return out
}

// tagsOf is row i's tags, those with no value (NULL or empty) left out.
func (w window) tagsOf(i int, names []string) map[string]string {
	out := map[string]string{}
	for j := range w.tags {
		if v, ok := w.tagValue(i, j); ok {
			out[names[j]] = v
		}
	}
	return out
}

// split returns example rows (target and every feature present) and query
// rows (target empty, every feature present), oldest first. Rows missing a
// feature are neither.
func (w window) split() (examples, queries []int) {
	examples, queries = make([]int, 0, w.rows()), make([]int, 0, w.target.NullN())
	for i := 0; i < w.rows(); i++ {
		if !w.featuresPresent(i) {
			continue
		}
		if w.target.IsNull(i) {
			queries = append(queries, i)
		} else {
			examples = append(examples, i)
		}
	}
	return examples, queries
}

// distinctTimes keeps the first of the rows to predict that share a time
// (the window is in time order, so they are neighbours) and returns how
// many it dropped. The output table holds one value per series and time:
// the others would be written over the same point, and the reply's
// written would fall below its query_rows with nothing saying why.
func (w window) distinctTimes(queries []int) ([]int, int) {
	out := queries[:0:0]
	for k, i := range queries {
		if k > 0 && w.times.Value(i) == w.times.Value(queries[k-1]) {
			continue
		}
		out = append(out, i)
	}
	return out, len(queries) - len(out)
}

// newest keeps the last n indexes (the most recent rows).
func newest(idx []int, n int) []int {
	if len(idx) > n {
		return idx[len(idx)-n:]
	}
	return idx
}

// contextRecord builds the context (features, target) from example rows.
func (w window) contextRecord(features []string, rows []int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.ContextSchema(features))
	defer b.Release()
	for j, f := range w.features {
		fb := b.Field(j).(*array.Float64Builder)
		fb.Reserve(len(rows))
		for _, i := range rows {
			fb.UnsafeAppend(f.Value(i))
		}
	}
	tb := b.Field(len(features)).(*array.Float64Builder)
	tb.Reserve(len(rows))
	for _, i := range rows {
		tb.UnsafeAppend(w.target.Value(i))
	}
	return b.NewRecordBatch()
}

// queryRecord is the query rows (time and features) as one record.
func (w window) queryRecord(features []string, rows []int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.QuerySchema(features))
	defer b.Release()
	tb := b.Field(0).(*array.TimestampBuilder)
	tb.Reserve(len(rows))
	for _, i := range rows {
		tb.UnsafeAppend(w.times.Value(i))
	}
	for j, f := range w.features {
		fb := b.Field(1 + j).(*array.Float64Builder)
		fb.Reserve(len(rows))
		for _, i := range rows {
			fb.UnsafeAppend(f.Value(i))
		}
	}
	return b.NewRecordBatch()
}

// sortedKeys is used for stable log output.
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
