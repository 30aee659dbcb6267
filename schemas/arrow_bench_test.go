package schemas

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchQueries is a batch of query rows as the producer sends them: a
// minute apart, with smooth, noisy features.
func benchQueries(rows, features int) arrow.RecordBatch {
	names := make([]string, features)
	for i := range names {
		names[i] = fmt.Sprintf("x%d", i+1)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, QuerySchema(names))
	defer b.Release()
	tb := b.Field(0).(*array.TimestampBuilder)
	for r := range rows {
		tb.Append(arrow.Timestamp(int64(r) * 60e6))
	}
	for j := range features {
		fb := b.Field(1 + j).(*array.Float64Builder)
		for r := range rows {
			fb.Append(math.Sin(float64(r)/float64(17+5*j)) + 1e-3*float64((r*7919+j)%1000))
		}
	}
	return b.NewRecordBatch()
}

// BenchmarkEncodeRecord is the bus's hot path: every batch and result is
// encoded once and decoded once.
func BenchmarkEncodeRecord(b *testing.B) {
	for _, rows := range []int{250, 1000} {
		rec := benchQueries(rows, 4)
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			var size int
			b.ReportAllocs()
			for b.Loop() {
				body, err := EncodeRecord(rec)
				if err != nil {
					b.Fatal(err)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "bytes/msg")
			b.ReportMetric(float64(size)/float64(rows*5*8), "ratio")
		})
		rec.Release()
	}
}

func BenchmarkDecodeRecord(b *testing.B) {
	for _, rows := range []int{250, 1000} {
		rec := benchQueries(rows, 4)
		body, err := EncodeRecord(rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := DecodeRecord(body, rec.Schema())
				if err != nil {
					b.Fatal(err)
				}
				got.Release()
			}
		})
		rec.Release()
	}
}
