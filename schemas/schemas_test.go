package schemas

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
)

func TestSealRoundTrip(t *testing.T) {
	s, err := NewSealer([]byte("0123456789abcdef-secret"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal("my-key", "t_1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "my-key") {
		t.Fatal("sealed text contains the key")
	}
	if got, err := s.Open(sealed, "t_1"); err != nil || got != "my-key" {
		t.Fatalf("open=%q %v", got, err)
	}
	// A seal is bound to its task: replayed into another task's job, it
	// does not open.
	if got, err := s.Open(sealed, "t_2"); err == nil {
		t.Fatalf("a key sealed for t_1 opened for t_2: %q", got)
	}
	other, _ := NewSealer([]byte("another-secret-0123456"))
	if _, err := other.Open(sealed, "t_1"); err == nil {
		t.Fatal("opened with the wrong secret")
	}
	expired, _ := s.Seal("k", "t_1", -time.Second)
	if _, err := s.Open(expired, "t_1"); err != ErrSealExpired {
		t.Fatalf("expired: %v", err)
	}
	if _, err := s.Open("!!!", "t_1"); err == nil {
		t.Fatal("opened garbage")
	}
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Fatal("short secret accepted")
	}
}

// A key's id tells keys apart without revealing them: stable for one key
// and secret, different for another key or another secret, never the key.
func TestKeyID(t *testing.T) {
	s, _ := NewSealer([]byte("0123456789abcdef-secret"))
	o, _ := NewSealer([]byte("another-secret-0123456"))
	a := s.KeyID("valid-key")
	if a == "" || a != s.KeyID("valid-key") || strings.Contains(a, "valid-key") {
		t.Fatalf("KeyID = %q", a)
	}
	if a == s.KeyID("bogus-key") || a == o.KeyID("valid-key") || s.KeyID("") != "" {
		t.Fatal("KeyID does not tell keys (or secrets) apart")
	}
}

func TestParseDuration(t *testing.T) {
	cases := map[string]time.Duration{"30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "15m": 15 * time.Minute, "300s": 300 * time.Second, "1.5d": 36 * time.Hour,
		"15min": 15 * time.Minute, "90min": 90 * time.Minute, "1.5min": 90 * time.Second}
	for in, want := range cases {
		if got, err := ParseDuration(in); err != nil || time.Duration(got) != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "0s", "-5m", "soon", "5x", "min", "0min", "5mins"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for _, big := range []string{"100000000000d", "1e13h", "300000w"} {
		if _, err := ParseDuration(big); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("%q: %v, want too large", big, err)
		}
	}
	if got := Duration(30 * 24 * time.Hour).String(); got != "30d" {
		t.Errorf("String=%s", got)
	}
	// An unset duration in a message survives its JSON round trip (a
	// dead-lettered job's verdict carries none, and must still be read).
	var m TaskMeta
	b, _ := json.Marshal(TaskMeta{TaskID: "t_x"})
	if err := json.Unmarshal(b, &m); err != nil || m.RequestTimeout != 0 {
		t.Errorf("zero duration round trip: %v %v (%s)", m.RequestTimeout, err, b)
	}
}

func TestArrowRoundTripAndRefusals(t *testing.T) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ResultSchema)
	defer b.Release()
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1, 2}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{1.5, 0}, []bool{true, false})
	rec := b.NewRecordBatch()
	defer rec.Release()
	body, err := EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(body, ResultSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NumRows() != 2 || got.Column(1).(*array.Float64).Value(0) != 1.5 || !got.Column(1).IsNull(1) {
		t.Fatalf("round trip lost data: %v", got)
	}
	if _, err := DecodeRecord(body, QuerySchema([]string{"a"})); err == nil {
		t.Fatal("schema mismatch accepted")
	}
	// A message of an earlier version, compressed whole as one ZSTD frame,
	// still decodes.
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	old, err := DecodeRecord(enc.EncodeAll(body, nil), ResultSchema)
	if err != nil {
		t.Fatalf("zstd frame: %v", err)
	}
	defer old.Release()
	if old.NumRows() != 2 || old.Column(1).(*array.Float64).Value(0) != 1.5 {
		t.Fatalf("zstd frame lost data: %v", old)
	}
	for _, bad := range [][]byte{nil, []byte("not arrow"), body[:len(body)/2]} {
		if _, err := DecodeRecord(bad, nil); err == nil {
			t.Errorf("decoded %d bad bytes", len(bad))
		}
	}
}

func TestJobIDs(t *testing.T) {
	s, e := time.Unix(0, 0), time.Unix(3600, 0)
	args := RunArgs{Measurement: "m", Tags: map[string]string{"host": "a", "dc": "x"}}
	a := JobMsgID("t", args, s, e, "", false)
	same := RunArgs{Measurement: "m", Tags: map[string]string{"dc": "x", "host": "a"}}
	if a != JobMsgID("t", same, s.In(time.FixedZone("x", 3600)), e, "", false) {
		t.Fatal("message id depends on the time zone or map order")
	}
	if a == JobMsgID("t", args, s, e, "", true) || a == JobMsgID("t", args, s, e, "r1", false) {
		t.Fatal("dry runs and re-runs must get their own ids")
	}
	other := RunArgs{Measurement: "m", Tags: map[string]string{"host": "b", "dc": "x"}}
	if a == JobMsgID("t", other, s, e, "", false) {
		t.Fatal("two series over one window must be two jobs")
	}
	if TaskID(a) != TaskID(a) || !strings.HasPrefix(TaskID(a), "t_") {
		t.Fatal("task id not deterministic")
	}
	if got := SubjectToken("a.b*c>d e"); got != "a_b_c_d_e" {
		t.Fatalf("SubjectToken=%s", got)
	}
}

func TestTaskMetasDecode(t *testing.T) {
	var c TaskMetas
	for i := range 2*maxTaskMetas + 3 {
		hdr := fmt.Sprintf(`{"task_id":"t_%d","batches":%d,"features":["a","b"]}`, i%300, i)
		for range 2 { // the second read is remembered
			m, err := c.Decode(hdr)
			if err != nil || m.TaskID != fmt.Sprintf("t_%d", i%300) || m.Batches != i || len(m.Features) != 2 {
				t.Fatalf("Decode(%s) = %+v, %v", hdr, m, err)
			}
		}
	}
	if len(c.m) > maxTaskMetas {
		t.Fatalf("remembers %d headers, want at most %d", len(c.m), maxTaskMetas)
	}
	if _, err := c.Decode(`{"task_id":`); err == nil {
		t.Fatal("a cut header decoded")
	}
}
