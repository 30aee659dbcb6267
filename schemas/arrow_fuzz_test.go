package schemas

import (
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fuzzSchemas are the schemas messages are decoded against.
var fuzzSchemas = []*arrow.Schema{nil, ResultSchema, QuerySchema([]string{"a", "b"}), ContextSchema([]string{"a"})}

// encodeSeed builds a valid message of schema s with n rows.
func encodeSeed(f *testing.F, s *arrow.Schema, n int) []byte {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i := 0; i < n; i++ {
		for j, fld := range s.Fields() {
			switch fb := b.Field(j).(type) {
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(int64(i) * 3600e6))
			case *array.Float64Builder:
				if fld.Nullable && i%3 == 0 {
					fb.AppendNull()
				} else {
					fb.Append(float64(i) * math.Pi)
				}
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	body, err := EncodeRecord(rec)
	if err != nil {
		f.Fatal(err)
	}
	return body
}

// FuzzDecodeRecord feeds arbitrary bytes to the decoder every consumer uses
// on message bodies: it must return a record of the wanted schema or an
// error, never panic, never hand back a record it cannot read.
//
//	go test ./schemas -run '^$' -fuzz FuzzDecodeRecord -fuzztime 1m
func FuzzDecodeRecord(f *testing.F) {
	for i, s := range fuzzSchemas[1:] {
		body := encodeSeed(f, s, 5)
		f.Add(body, uint8(i+1))
		f.Add(body[:len(body)/2], uint8(i+1))
		f.Add(body, uint8(0))
		f.Add(encodeSeed(f, s, 0), uint8(i+1))
		f.Add(append(append([]byte{}, body...), body...), uint8(i+1))
	}
	f.Add([]byte{}, uint8(0))
	f.Add([]byte("ARROW1\x00\x00"), uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0}, uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		want := fuzzSchemas[int(which)%len(fuzzSchemas)]
		rec, err := DecodeRecord(body, want)
		if err != nil {
			if rec != nil {
				t.Fatal("a record and an error")
			}
			return
		}
		defer rec.Release()
		if want != nil && !rec.Schema().Equal(want) {
			t.Fatalf("schema %s, want %s", rec.Schema(), want)
		}
		// Every column can be read to the end, as the consumers do.
		for j := 0; j < int(rec.NumCols()); j++ {
			col := rec.Column(j)
			if col.Len() != int(rec.NumRows()) {
				t.Fatalf("column %d has %d rows of %d", j, col.Len(), rec.NumRows())
			}
			for i := 0; i < col.Len(); i++ {
				switch c := col.(type) {
				case *array.Float64:
					_ = c.Value(i)
				case *array.Timestamp:
					_ = c.Value(i)
				}
			}
		}
	})
}
