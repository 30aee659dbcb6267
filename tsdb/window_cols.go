package tsdb

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// windowCols gathers a window's rows column by column, in the order read.
// Tags keep their bytes in one buffer per column, so a row costs no
// allocation.
type windowCols struct {
	times []int64 // µs since the Unix epoch
	tags  []tagCol
	nums  [][]float64 // NaN for an empty value
	// scan targets of the fallback path
	ts      pgtype.Timestamptz
	tagVals []pgtype.Text
	numVals []pgtype.Float8
}

// tagCol is a text column: ends[i] is where row i's bytes end in data, and
// a negative end marks NULL.
type tagCol struct {
	data []byte
	ends []int
}

func (t *tagCol) append(v []byte, null bool) {
	if null {
		t.ends = append(t.ends, -len(t.data)-1)
		return
	}
	t.data = append(t.data, v...)
	t.ends = append(t.ends, len(t.data))
}

func (t *tagCol) value(i int) ([]byte, bool) {
	end := t.ends[i]
	if end < 0 {
		return nil, false
	}
	start := 0
	if i > 0 {
		start = t.ends[i-1]
		if start < 0 {
			start = -start - 1
		}
	}
	return t.data[start:end], true
}

// reset empties c for a read of nTags tag and nNums numeric columns,
// keeping the buffers it has.
func (c *windowCols) reset(nTags, nNums int) {
	c.times = c.times[:0]
	c.tags = resize(c.tags, nTags)
	for i := range c.tags {
		c.tags[i].data, c.tags[i].ends = c.tags[i].data[:0], c.tags[i].ends[:0]
	}
	c.nums = resize(c.nums, nNums)
	for i := range c.nums {
		c.nums[i] = c.nums[i][:0]
	}
	c.tagVals, c.numVals = resize(c.tagVals, nTags), resize(c.numVals, nNums)
}

// resize returns s with length n, reusing its elements and capacity.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		s = append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
}

// cut keeps the first n rows read (the newest).
func (c *windowCols) cut(n int) {
	c.times = c.times[:n]
	for i := range c.tags {
		c.tags[i].ends = c.tags[i].ends[:n]
	}
	for i := range c.nums {
		c.nums[i] = c.nums[i][:n]
	}
}

// binary reports whether the rows come as windowSQL asks for them and in
// binary form: then appendRaw decodes them without pgx's scan machinery.
func (c *windowCols) binary(fds []pgconn.FieldDescription) bool {
	if len(fds) != 1+len(c.tags)+len(c.nums) {
		return false
	}
	for i, fd := range fds {
		switch {
		case i == 0:
			if fd.DataTypeOID != pgtype.TimestamptzOID || fd.Format != pgtype.BinaryFormatCode {
				return false
			}
		case i <= len(c.tags):
			// text reads the same in either format
			if fd.DataTypeOID != pgtype.TextOID {
				return false
			}
		default:
			if fd.DataTypeOID != pgtype.Float8OID || fd.Format != pgtype.BinaryFormatCode {
				return false
			}
		}
	}
	return true
}

// pgEpochMicros is 2000-01-01, PostgreSQL's epoch, in µs since 1970.
const pgEpochMicros = 946_684_800_000_000

// appendRaw decodes one row of binary values.
func (c *windowCols) appendRaw(vals [][]byte) error {
	if len(vals) != 1+len(c.tags)+len(c.nums) {
		return fmt.Errorf("row of %d values, want %d", len(vals), 1+len(c.tags)+len(c.nums))
	}
	if vals[0] == nil {
		return nil // no time: not a point
	}
	if len(vals[0]) != 8 {
		return fmt.Errorf("timestamptz of %d bytes", len(vals[0]))
	}
	us := int64(binary.BigEndian.Uint64(vals[0]))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return nil // ±infinity: not a point
	}
	c.times = append(c.times, us+pgEpochMicros)
	for i := range c.tags {
		v := vals[1+i]
		c.tags[i].append(v, v == nil)
	}
	for i := range c.nums {
		v := vals[1+len(c.tags)+i]
		x := math.NaN()
		if v != nil {
			if len(v) != 8 {
				return fmt.Errorf("float8 of %d bytes", len(v))
			}
			if f := math.Float64frombits(binary.BigEndian.Uint64(v)); !math.IsNaN(f) && !math.IsInf(f, 0) {
				x = f
			}
		}
		c.nums[i] = append(c.nums[i], x)
	}
	return nil
}

// appendScanned reads one row through pgx's scanning, for rows that do not
// come in binary form.
func (c *windowCols) appendScanned(rows pgx.Rows) error {
	dest := make([]any, 0, 1+len(c.tagVals)+len(c.numVals))
	dest = append(dest, &c.ts)
	for i := range c.tagVals {
		dest = append(dest, &c.tagVals[i])
	}
	for i := range c.numVals {
		dest = append(dest, &c.numVals[i])
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	if !c.ts.Valid || c.ts.InfinityModifier != pgtype.Finite {
		return nil
	}
	c.times = append(c.times, c.ts.Time.UnixMicro())
	for i, v := range c.tagVals {
		c.tags[i].append([]byte(v.String), !v.Valid)
	}
	for i, v := range c.numVals {
		x := math.NaN()
		if v.Valid && !math.IsNaN(v.Float64) && !math.IsInf(v.Float64, 0) {
			x = v.Float64
		}
		c.nums[i] = append(c.nums[i], x)
	}
	return nil
}
