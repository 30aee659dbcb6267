package schemas

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

func packSeries() []PackSeries {
	m := func(id string, batches, ctx, queries int) TaskMeta {
		return TaskMeta{TaskID: id, Parent: "t_run", Trigger: "fleet", Features: []string{"x"}, Batches: batches,
			Series: map[string]string{"site": id}, SealedKey: "sealed", Model: "m", ContextRows: ctx, QueryRows: queries, ContextDigest: "d" + id}
	}
	return []PackSeries{
		{Meta: m("t_run-sa", 1, 30, 3)},
		{Meta: m("t_run-sb", 0, 12, 4), Status: StatusSkipped, Message: "fewer than min_history", Code: 200},
		{Meta: m("t_run-sc", 1, 40, 5)},
	}
}

func TestPackRoundTrip(t *testing.T) {
	in := Pack{Series: packSeries(), Context: []byte("ctx"), Queries: []byte("queries")}
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
	if len(out.Series) != len(in.Series) || !bytes.Equal(out.Context, in.Context) || !bytes.Equal(out.Queries, in.Queries) {
		t.Fatalf("pack %+v, want %+v", out, in)
	}
	for i, s := range in.Series {
		got := out.Series[i]
		if got.Meta.TaskID != s.Meta.TaskID || got.Status != s.Status || got.Message != s.Message || got.Meta.Series["site"] != s.Meta.Series["site"] ||
			got.Meta.ContextRows != s.Meta.ContextRows || got.Meta.ContextDigest != s.Meta.ContextDigest || got.Meta.Model != "m" || got.Meta.SealedKey != "sealed" {
			t.Errorf("series %d: %+v, want %+v", i, got, s)
		}
	}
	if c, q := out.Series[1].PackRows(); c != 0 || q != 0 {
		t.Errorf("a verdict has %d context and %d query rows in the pack, want none", c, q)
	}
	if c, q := out.Series[2].PackRows(); c != 40 || q != 5 {
		t.Errorf("series c has %d and %d rows in the pack, want 40 and 5", c, q)
	}
	rs := []Result{{Meta: in.Series[0].Meta, Batch: 0, Status: StatusOK, Rows: 3, Outside: 1},
		{Meta: in.Series[1].Meta, Batch: VerdictBatch, Status: StatusSkipped, Message: "fewer"},
		{Meta: in.Series[2].Meta, Batch: 0, Status: StatusFailed, Rows: 5, Message: "HTTP 400", Code: 400}}
	rm, err := NewResultPackMsg("fleet", "t_run", rs, []byte("preds"))
	if err != nil {
		t.Fatal(err)
	}
	got, body, err := DecodeResultPack(rm.Header, rm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != "preds" || got[0].Meta.SealedKey != "" || got[0].Outside != 1 || got[0].Rows != 3 || got[0].Meta.TaskID != "t_run-sa" {
		t.Errorf("result 0: %+v, want its rows and no key", got[0])
	}
	if got[1].Batch != VerdictBatch || got[1].Status != StatusSkipped || got[2].Code != 400 || got[2].Message != "HTTP 400" || got[2].Rows != 5 {
		t.Errorf("results 1, 2: %+v %+v", got[1], got[2])
	}
	if a, b := PackMsgID("t_run", []string{"x", "y"}), PackMsgID("t_run", []string{"x", "z"}); a == b || a != PackMsgID("t_run", []string{"x", "y"}) {
		t.Errorf("pack ids %q %q: want one per set of series", a, b)
	}
	// A series that does not share its run's meta is refused.
	odd := packSeries()
	odd[2].Meta.Model = "other"
	if _, err := NewPackMsg("fleet", "t_run", Pack{Series: odd}); err == nil {
		t.Error("a series of another model packed")
	}
}

func TestPackRefusesMalformed(t *testing.T) {
	in := Pack{Series: packSeries(), Context: []byte("ctx"), Queries: []byte("queries")}
	good, err := NewPackMsg("fleet", "t_run", in)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(edit func([]PackSeries)) []byte {
		s := packSeries()
		edit(s)
		m, err := NewPackMsg("fleet", "t_run", Pack{Series: s})
		if err != nil {
			t.Fatal(err)
		}
		return m.Data
	}
	for _, c := range []struct {
		name   string
		parent string
		count  string
		data   []byte
	}{
		{"truncated", "t_run", "3", good.Data[:len(good.Data)-2]},
		{"trailing bytes", "t_run", "3", append(bytes.Clone(good.Data), 0)},
		{"count differs from header", "t_run", "2", good.Data},
		{"no count", "t_run", "", good.Data},
		{"too many", "t_run", strconv.Itoa(MaxPackSeries + 1), good.Data},
		{"another run's", "t_other", "3", good.Data},
		{"a series twice", "t_run", "3", mk(func(s []PackSeries) { s[2].Meta.TaskID = s[0].Meta.TaskID })},
		{"a series without queries", "t_run", "3", mk(func(s []PackSeries) { s[0].Meta.QueryRows = 0 })},
		{"a series of two batches", "t_run", "3", mk(func(s []PackSeries) { s[0].Meta.Batches = 2 })},
		{"a verdict that is none", "t_run", "3", mk(func(s []PackSeries) { s[1].Status = StatusOK })},
	} {
		h := nats.Header{}
		h.Set(HeaderPack, c.count)
		h.Set(HeaderTask, c.parent)
		if _, err := DecodePack(h, c.data); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
	// A result of a batch the series does not have, or of no status.
	for _, r := range []Result{{Meta: packSeries()[0].Meta, Batch: 1, Status: StatusOK}, {Meta: packSeries()[0].Meta, Batch: 0, Status: "maybe"}} {
		rm, err := NewResultPackMsg("fleet", "t_run", []Result{r}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := DecodeResultPack(rm.Header, rm.Data); err == nil || r.Status == "maybe" && !errors.Is(err, ErrUnknownStatus) {
			t.Errorf("result of batch %d, status %q: %v", r.Batch, r.Status, err)
		}
	}
}
