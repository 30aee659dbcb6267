package schemas

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

func packSeries() []PackSeries {
	m := func(id string, batches int) TaskMeta {
		return TaskMeta{TaskID: id, Parent: "t_run", Trigger: "fleet", Features: []string{"x"}, Batches: batches,
			Series: map[string]string{"site": id}, SealedKey: "sealed"}
	}
	return []PackSeries{
		{Meta: m("t_run-sa", 1), Context: []byte("ctx-a"), Queries: []byte("q-a")},
		{Meta: m("t_run-sb", 0), Status: StatusSkipped, Message: "fewer than min_history", Code: 200},
		{Meta: m("t_run-sc", 1), Context: []byte("ctx-c"), Queries: []byte("q-c")},
	}
}

func TestPackRoundTrip(t *testing.T) {
	in := packSeries()
	m, err := NewPackMsg("fleet", "t_run", in)
	if err != nil {
		t.Fatal(err)
	}
	if !IsPack(m.Header) || PackParent(m.Header) != "t_run" || m.Subject != SubjectBatches+"fleet" || m.Header.Get(HeaderSchema) != Version {
		t.Fatalf("pack headers %v on %s", m.Header, m.Subject)
	}
	out, err := DecodePack(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d series, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].Meta.TaskID != in[i].Meta.TaskID || out[i].Status != in[i].Status || out[i].Message != in[i].Message ||
			!bytes.Equal(out[i].Context, in[i].Context) || !bytes.Equal(out[i].Queries, in[i].Queries) || out[i].Meta.Series["site"] != in[i].Meta.Series["site"] {
			t.Errorf("series %d: %+v, want %+v", i, out[i], in[i])
		}
	}
	rs := []Result{{Meta: in[0].Meta, Batch: 0, Status: StatusOK, Rows: 3, Outside: 1, Body: []byte("preds")},
		{Meta: in[1].Meta, Batch: VerdictBatch, Status: StatusSkipped, Message: "fewer"},
		{Meta: in[2].Meta, Batch: 0, Status: StatusFailed, Rows: 2, Message: "HTTP 400", Code: 400, Body: []byte("dropped")}}
	rm, err := NewResultPackMsg("fleet", "t_run", rs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeResultPack(rm.Header, rm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Meta.SealedKey != "" || string(got[0].Body) != "preds" || got[0].Outside != 1 || got[0].Rows != 3 {
		t.Errorf("result 0: %+v, want its predictions and no key", got[0])
	}
	if got[1].Batch != VerdictBatch || got[1].Status != StatusSkipped || got[2].Body != nil || got[2].Code != 400 || got[2].Message != "HTTP 400" {
		t.Errorf("results 1, 2: %+v %+v", got[1], got[2])
	}
	if a, b := PackMsgID("t_run", []string{"x", "y"}), PackMsgID("t_run", []string{"x", "z"}); a == b || a != PackMsgID("t_run", []string{"x", "y"}) {
		t.Errorf("pack ids %q %q: want one per set of series", a, b)
	}
}

func TestPackRefusesMalformed(t *testing.T) {
	good, err := NewPackMsg("fleet", "t_run", packSeries())
	if err != nil {
		t.Fatal(err)
	}
	other := packSeries()
	other[1].Meta.Parent = "t_other"
	foreign, _ := NewPackMsg("fleet", "t_run", other)
	twice := packSeries()
	twice[2].Meta.TaskID = twice[0].Meta.TaskID
	dup, _ := NewPackMsg("fleet", "t_run", twice)
	noQueries := packSeries()
	noQueries[0].Queries = nil
	bare, _ := NewPackMsg("fleet", "t_run", noQueries)
	okVerdict := packSeries()
	okVerdict[1].Status = StatusOK
	badVerdict, _ := NewPackMsg("fleet", "t_run", okVerdict)
	for _, c := range []struct {
		name  string
		count string
		data  []byte
	}{
		{"truncated", "3", good.Data[:len(good.Data)-2]},
		{"trailing bytes", "3", append(bytes.Clone(good.Data), 0)},
		{"count differs from header", "2", good.Data},
		{"no count", "", good.Data},
		{"too many", strconv.Itoa(MaxPackSeries + 1), binary.AppendUvarint(nil, MaxPackSeries+1)},
		{"a series of another run", "3", foreign.Data},
		{"a series twice", "3", dup.Data},
		{"a series without queries", "3", bare.Data},
		{"a verdict that is none", "3", badVerdict.Data},
	} {
		h := nats.Header{}
		for k, v := range good.Header {
			h[k] = v
		}
		h.Set(HeaderPack, c.count)
		if _, err := DecodePack(h, c.data); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
	// A result of a batch the series does not have.
	rm, _ := NewResultPackMsg("fleet", "t_run", []Result{{Meta: packSeries()[0].Meta, Batch: 1, Status: StatusOK}})
	if _, err := DecodeResultPack(rm.Header, rm.Data); err == nil {
		t.Error("result of batch 1 of a one-batch series decoded")
	}
	rm, _ = NewResultPackMsg("fleet", "t_run", []Result{{Meta: packSeries()[0].Meta, Batch: 0, Status: "maybe"}})
	if _, err := DecodeResultPack(rm.Header, rm.Data); !errors.Is(err, ErrUnknownStatus) {
		t.Errorf("unknown status: %v", err)
	}
}
