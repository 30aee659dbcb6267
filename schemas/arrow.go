package schemas

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
)

// Arrow column names used on the bus.
const (
	ColTime  = "time"
	ColValue = "value"
	// ColTarget is the target column of a context record. Feature columns keep
	// their source names; a feature named like this is refused by validation.
	ColTarget = "__target"
)

// TimeType is the Arrow type of every time column: microseconds, UTC, as
// PostgreSQL stores timestamptz.
var TimeType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// QuerySchema is the schema of a batch of query rows: time, then features.
func QuerySchema(features []string) *arrow.Schema {
	fs := make([]arrow.Field, 0, len(features)+1)
	fs = append(fs, arrow.Field{Name: ColTime, Type: TimeType})
	for _, f := range features {
		fs = append(fs, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Float64})
	}
	return arrow.NewSchema(fs, nil)
}

// ContextSchema is the schema of a task's context: features, then the target.
func ContextSchema(features []string) *arrow.Schema {
	fs := make([]arrow.Field, 0, len(features)+1)
	for _, f := range features {
		fs = append(fs, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Float64})
	}
	fs = append(fs, arrow.Field{Name: ColTarget, Type: arrow.PrimitiveTypes.Float64})
	return arrow.NewSchema(fs, nil)
}

// ResultSchema is the schema of a batch of predictions. A null value means the
// model gave no prediction for that row; it is not written.
var ResultSchema = arrow.NewSchema([]arrow.Field{
	{Name: ColTime, Type: TimeType},
	{Name: ColValue, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// zstdMagic starts every ZSTD frame. An Arrow IPC stream starts with
// 0xFFFFFFFF, so the two forms cannot be mistaken for each other.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// MaxDecodedBytes bounds what one message may decompress to.
const MaxDecodedBytes = 256 << 20

// zstdDecoder decodes the ZSTD frames earlier versions sent (a message
// may outlive an upgrade in its stream). Its DecodeAll is safe for
// concurrent use. Built once, never changed.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxDecodedBytes))
	if err != nil {
		panic(fmt.Sprintf("zstd decoder: %v", err)) // only bad options fail
	}
	return dec
})

// EncodeRecord writes one record as an Arrow IPC stream, uncompressed: the
// float columns that make up a batch compress to ~0.9 of their size, and
// ZSTD cost more CPU per task (13% of the pipeline's) than the bus saved.
func EncodeRecord(rec arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(encodedSize(rec))
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("encode arrow: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode arrow: %w", err)
	}
	return buf.Bytes(), nil
}

// encodedSize estimates the bytes of rec's IPC stream: its buffers, padded,
// and room for the schema and the message headers.
func encodedSize(rec arrow.RecordBatch) int {
	n := 1024
	for _, col := range rec.Columns() {
		for _, b := range col.Data().Buffers() {
			if b != nil {
				n += b.Len() + 8
			}
		}
	}
	return n
}

// DecodeRecord reads the single record of an Arrow IPC stream: plain
// (EncodeRecord), compressed whole as one ZSTD frame, or with
// ZSTD-compressed buffers (the forms earlier versions sent), and checks that its schema is want (when
// want is not nil). The caller releases the record.
func DecodeRecord(b []byte, want *arrow.Schema) (rec arrow.RecordBatch, err error) {
	defer func() {
		// The IPC reader panics on some malformed inputs; a bad message is a
		// permanent error for the caller, never a crash.
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("decode arrow: malformed stream: %v", p)
		}
	}()
	if bytes.HasPrefix(b, zstdMagic) {
		if b, err = zstdDecoder().DecodeAll(b, nil); err != nil {
			return nil, fmt.Errorf("decode arrow: %w", err)
		}
	}
	// Nothing in the stream may claim more than the stream holds.
	if err := checkSchemaMessage(b); err != nil {
		return nil, fmt.Errorf("decode arrow: %w", err)
	}
	r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(&budgetAllocator{memory.DefaultAllocator, decodeBudget(len(b))}),
		ipc.WithMetadataSizeLimit(int64(len(b))), ipc.WithBodySizeLimit(int64(len(b))))
	if err != nil {
		return nil, fmt.Errorf("decode arrow: %w", err)
	}
	defer r.Release()
	if want != nil && !r.Schema().Equal(want) {
		return nil, fmt.Errorf("decode arrow: schema %s, want %s", r.Schema(), want)
	}
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("decode arrow: %w", err)
		}
		return nil, fmt.Errorf("decode arrow: no record")
	}
	rec = r.RecordBatch()
	rec.Retain()
	if r.Next() {
		rec.Release()
		return nil, fmt.Errorf("decode arrow: more than one record")
	}
	return rec, nil
}
