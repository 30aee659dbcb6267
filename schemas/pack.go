package schemas

// Packs: many small series of a group_by run in one message. A pack batch
// (producer → worker) carries its series (each its own task: its own
// TaskMeta, Batches 1, or the verdict of a series that ended in the
// producer) and their rows in two records: every series' context rows
// (ContextSchema) and every series' query rows (QuerySchema), series after
// series, ContextRows and QueryRows of each series to predict (a verdict
// has none). A pack result (worker → writer) carries one Result per
// series and one record (ResultSchemaFor) of the predictions of every
// StatusOK one, Rows each, in order. Each series stays a task of its own,
// with its own ledger row and batch 0 (or its verdict): a pack is only a
// way to ship them together. The series of a pack share their run's meta
// but for their own fields (seriesHead), which is sent once. A pack's
// message has HeaderPack (its number of series) and, in HeaderTask, the
// bare id of the run's task.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/nats-io/nats.go"
)

// HeaderPack is the number of series a pack message carries.
const HeaderPack = "Regressd-Pack"

// MaxPackSeries bounds the series of one pack (a decoder refuses more).
const MaxPackSeries = 4096

// PackSeries is one series of a pack batch: a series to predict (Status
// empty; Meta.Batches 1) or a series that ended in the producer (Status,
// Message and Code its verdict; Meta.Batches 0).
type PackSeries struct {
	Meta    TaskMeta
	Status  Status
	Message string
	Code    int
}

// Pack is a pack batch: its series, and the encoded records of their
// context rows and query rows (see the file's comment).
type Pack struct {
	Series  []PackSeries
	Context []byte
	Queries []byte
}

// seriesHead is what a series of a pack does not share with its run: its
// own meta fields, and its verdict or result.
type seriesHead struct {
	TaskID         string            `json:"task_id"`
	Series         map[string]string `json:"series,omitempty"`
	Batches        int               `json:"batches,omitempty"`
	ContextDigest  string            `json:"context_digest,omitempty"`
	ContextRows    int               `json:"context_rows,omitempty"`
	QueryRows      int               `json:"query_rows,omitempty"`
	ReadRows       int               `json:"read_rows,omitempty"`
	ReadTruncated  bool              `json:"read_truncated,omitempty"`
	SkippedExists  int               `json:"skipped_existing,omitempty"`
	DroppedQueries int               `json:"dropped_queries,omitempty"`

	Batch   int    `json:"batch"`
	Status  Status `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
	Rows    int    `json:"rows,omitempty"`
	Outside int    `json:"outside,omitempty"`
}

// split is a meta's shared part (its own fields cleared) and its head.
func split(m TaskMeta) (TaskMeta, seriesHead) {
	h := seriesHead{TaskID: m.TaskID, Series: m.Series, Batches: m.Batches, ContextDigest: m.ContextDigest,
		ContextRows: m.ContextRows, QueryRows: m.QueryRows, ReadRows: m.ReadRows, ReadTruncated: m.ReadTruncated,
		SkippedExists: m.SkippedExists, DroppedQueries: m.DroppedQueries}
	m.TaskID, m.Series, m.Batches, m.ContextDigest, m.ContextNUID, m.ContextChunks = "", nil, 0, "", "", 0
	m.ContextRows, m.QueryRows, m.ReadRows, m.ReadTruncated, m.SkippedExists, m.DroppedQueries = 0, 0, 0, false, 0, 0
	return m, h
}

// join is split's inverse.
func join(base TaskMeta, h seriesHead) TaskMeta {
	base.TaskID, base.Series, base.Batches, base.ContextDigest = h.TaskID, h.Series, h.Batches, h.ContextDigest
	base.ContextRows, base.QueryRows, base.ReadRows, base.ReadTruncated = h.ContextRows, h.QueryRows, h.ReadRows, h.ReadTruncated
	base.SkippedExists, base.DroppedQueries = h.SkippedExists, h.DroppedQueries
	return base
}

// IsPack reports whether a batch or result message is a pack.
func IsPack(h nats.Header) bool { return h.Get(HeaderPack) != "" }

// PackParent is the run's task id a pack message names.
func PackParent(h nats.Header) string { return h.Get(HeaderTask) }

// PackMsgID is the deduplication id of a pack of parent's series (and of
// its result): the same series in the same pack are the same message.
func PackMsgID(parent string, taskIDs []string) string {
	h := sha256.New()
	for _, id := range taskIDs {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return parent + ":pack:" + hex.EncodeToString(h.Sum(nil)[:12])
}

// PackRows is how many context and query rows a series of a pack has in
// the pack's records: none for a verdict.
func (s PackSeries) PackRows() (context, queries int) {
	if s.Status != "" {
		return 0, 0
	}
	return s.Meta.ContextRows, s.Meta.QueryRows
}

// NewPackMsg encodes a pack batch of parent's series for the batches
// stream. Every series must share its run's meta but for its own fields.
func NewPackMsg(trigger, parent string, p Pack) (*nats.Msg, error) {
	heads := make([]seriesHead, len(p.Series))
	metas := make([]TaskMeta, len(p.Series))
	for i, s := range p.Series {
		metas[i] = s.Meta
		heads[i].Status, heads[i].Message, heads[i].Code = s.Status, s.Message, s.Code
		if s.Status != "" {
			heads[i].Batch = VerdictBatch
		}
	}
	body, err := encodePack(parent, metas, heads, p.Context, p.Queries)
	if err != nil {
		return nil, err
	}
	return packMsg(SubjectBatches+SubjectToken(trigger), parent, len(p.Series), body), nil
}

// DecodePack reads a pack batch: every series belongs to the pack's run,
// once, and is either one batch to predict or a verdict. That the records
// hold the series' rows is the reader's to check.
func DecodePack(h nats.Header, data []byte) (Pack, error) {
	metas, heads, blobs, err := decodePack(h, data)
	if err != nil {
		return Pack{}, err
	}
	p := Pack{Series: make([]PackSeries, len(heads)), Context: blobs[0], Queries: blobs[1]}
	for i, hd := range heads {
		s := PackSeries{Meta: metas[i], Status: hd.Status, Message: hd.Message, Code: hd.Code}
		switch {
		case s.Status == "" && (hd.Batch != 0 || s.Meta.Batches != 1 || s.Meta.QueryRows < 1 || s.Meta.ContextRows < 0):
			return Pack{}, fmt.Errorf("pack series %s: a series to predict is one batch of its rows", s.Meta.TaskID)
		case s.Status != "" && (hd.Batch != VerdictBatch || s.Meta.Batches != 0 || s.Status != StatusSkipped && s.Status != StatusFailed):
			return Pack{}, fmt.Errorf("pack series %s: verdict %q is not one", s.Meta.TaskID, s.Status)
		}
		p.Series[i] = s
	}
	return p, nil
}

// NewResultPackMsg encodes the results of a pack batch (one per series,
// Batch 0 or VerdictBatch; their Body unused) and body, the record of the
// predictions of every StatusOK one, for the results stream. The writer
// never needs the model-service key: no meta carries one.
func NewResultPackMsg(trigger, parent string, rs []Result, body []byte) (*nats.Msg, error) {
	heads := make([]seriesHead, len(rs))
	metas := make([]TaskMeta, len(rs))
	for i, r := range rs {
		r.Meta.SealedKey = ""
		if r.Batch == VerdictBatch {
			r.Meta.Batches = 0
		}
		metas[i] = r.Meta
		heads[i] = seriesHead{Batch: r.Batch, Status: r.Status, Message: r.Message, Code: r.Code, Rows: r.Rows, Outside: r.Outside}
	}
	data, err := encodePack(parent, metas, heads, body, nil)
	if err != nil {
		return nil, err
	}
	return packMsg(SubjectResults+SubjectToken(trigger), parent, len(rs), data), nil
}

// DecodeResultPack reads a pack result: one Result per series, each
// checked as DecodeResult checks one, and the record of the predictions.
func DecodeResultPack(h nats.Header, data []byte) ([]Result, []byte, error) {
	metas, heads, blobs, err := decodePack(h, data)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Result, len(heads))
	for i, hd := range heads {
		r := Result{Meta: metas[i], Batch: hd.Batch, Status: hd.Status, Message: hd.Message, Code: hd.Code, Rows: hd.Rows, Outside: hd.Outside}
		if r.Batch < VerdictBatch || r.Batch >= max(r.Meta.Batches, 1) || r.Rows < 0 {
			return nil, nil, fmt.Errorf("pack result %s: batch %d of %d rows out of range", r.Meta.TaskID, r.Batch, r.Rows)
		}
		if !r.Status.result() || r.Status == StatusSeries {
			return nil, nil, fmt.Errorf("pack result %s: status %q %w", r.Meta.TaskID, r.Status, ErrUnknownStatus)
		}
		if r.Outside < 0 || r.Outside > r.Rows {
			r.Outside = 0
		}
		out[i] = r
	}
	return out, blobs[0], nil
}

func packMsg(subject, parent string, n int, body []byte) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	m.Header.Set(HeaderSchema, Version)
	m.Header.Set(HeaderTask, parent)
	m.Header.Set(HeaderPack, strconv.Itoa(n))
	return m
}

var errPackShape = errors.New("malformed pack")

// encodePack writes the shared meta, the heads (their meta fields filled
// from metas) and two records, each length-prefixed.
func encodePack(parent string, metas []TaskMeta, heads []seriesHead, a, b []byte) ([]byte, error) {
	if len(metas) == 0 || len(metas) > MaxPackSeries {
		return nil, fmt.Errorf("pack of %d series (1 to %d)", len(metas), MaxPackSeries)
	}
	base, _ := split(metas[0])
	for i, m := range metas {
		shared, own := split(m)
		if m.Parent != parent || !reflect.DeepEqual(shared, base) {
			return nil, fmt.Errorf("pack series %s does not share its run %s's meta", m.TaskID, parent)
		}
		own.Batch, own.Status, own.Message, own.Code, own.Rows, own.Outside = heads[i].Batch, heads[i].Status, heads[i].Message, heads[i].Code, heads[i].Rows, heads[i].Outside
		heads[i] = own
	}
	bj, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	hj, err := json.Marshal(heads)
	if err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	var body []byte
	for _, part := range [][]byte{bj, hj, a, b} {
		body = binary.AppendUvarint(body, uint64(len(part)))
		body = append(body, part...)
	}
	return body, nil
}

// decodePack reads what encodePack wrote: each series' meta, its head and
// the two records. Every series must be of the pack's run, once.
func decodePack(h nats.Header, data []byte) ([]TaskMeta, []seriesHead, [2][]byte, error) {
	var blobs [2][]byte
	parent := PackParent(h)
	n, err := strconv.Atoi(h.Get(HeaderPack))
	if err != nil || n < 1 || n > MaxPackSeries || parent == "" {
		return nil, nil, blobs, fmt.Errorf("pack header %q of run %q: %w", h.Get(HeaderPack), parent, errPackShape)
	}
	var parts [4][]byte
	for i := range parts {
		l, k := binary.Uvarint(data)
		if k <= 0 || l > uint64(len(data)-k) {
			return nil, nil, blobs, fmt.Errorf("pack part %d: %w", i, errPackShape)
		}
		parts[i], data = data[k:k+int(l):k+int(l)], data[k+int(l):]
	}
	if len(data) != 0 {
		return nil, nil, blobs, fmt.Errorf("%d bytes past the pack's records: %w", len(data), errPackShape)
	}
	var base TaskMeta
	var heads []seriesHead
	if err := json.Unmarshal(parts[0], &base); err != nil {
		return nil, nil, blobs, fmt.Errorf("pack meta: %w", err)
	}
	if err := json.Unmarshal(parts[1], &heads); err != nil {
		return nil, nil, blobs, fmt.Errorf("pack series: %w", err)
	}
	if len(heads) != n || base.Parent != parent {
		return nil, nil, blobs, fmt.Errorf("pack of run %q with %d series, its header says %q and %d: %w", base.Parent, len(heads), parent, n, errPackShape)
	}
	metas := make([]TaskMeta, n)
	seen := make(map[string]bool, n)
	for i, hd := range heads {
		if hd.TaskID == "" || seen[hd.TaskID] {
			return nil, nil, blobs, fmt.Errorf("pack series %d: task %q: %w", i, hd.TaskID, errPackShape)
		}
		seen[hd.TaskID] = true
		metas[i] = join(base, hd)
	}
	for i := range blobs {
		if len(parts[2+i]) > 0 {
			blobs[i] = parts[2+i]
		}
	}
	return metas, heads, blobs, nil
}
