package schemas

// Packs: many small series of a group_by run in one message. A pack batch
// (producer → worker) carries, per series, its task (its own TaskMeta,
// Batches 1), its context and its queries inline, or the verdict of a
// series that ends in the producer; a pack result (worker → writer)
// carries one Result per series. Each series stays a task of its own, with
// its own ledger row and batch 0 (or its verdict): a pack is only a way
// to ship them together. A pack's message has HeaderPack (its number of
// series) and, in HeaderTask, the bare id of the run's task.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// HeaderPack is the number of series a pack message carries.
const HeaderPack = "Regressd-Pack"

// MaxPackSeries bounds the series of one pack (a decoder refuses more).
const MaxPackSeries = 4096

// PackSeries is one series of a pack batch: a series to predict (Status
// empty; Meta.Batches 1; Context a ContextSchema record and Queries a
// QuerySchema record) or a series that ended in the producer (Status,
// Message and Code its verdict; Meta.Batches 0; no records).
type PackSeries struct {
	Meta    TaskMeta
	Status  Status
	Message string
	Code    int
	Context []byte
	Queries []byte
}

// packHead is an entry's JSON head; its records follow it.
type packHead struct {
	Meta    TaskMeta `json:"meta"`
	Batch   int      `json:"batch"`
	Status  Status   `json:"status,omitempty"`
	Message string   `json:"message,omitempty"`
	Code    int      `json:"code,omitempty"`
	Rows    int      `json:"rows,omitempty"`
	Outside int      `json:"outside,omitempty"`
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

// NewPackMsg encodes a pack batch of parent's series for the batches
// stream.
func NewPackMsg(trigger, parent string, series []PackSeries) (*nats.Msg, error) {
	if len(series) == 0 || len(series) > MaxPackSeries {
		return nil, fmt.Errorf("pack of %d series (1 to %d)", len(series), MaxPackSeries)
	}
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(series)))
	for _, s := range series {
		batch := 0
		if s.Status != "" {
			batch = VerdictBatch
		}
		var err error
		if body, err = appendEntry(body, packHead{Meta: s.Meta, Batch: batch, Status: s.Status, Message: s.Message, Code: s.Code}, s.Context, s.Queries); err != nil {
			return nil, err
		}
	}
	return packMsg(SubjectBatches+SubjectToken(trigger), parent, len(series), body), nil
}

// DecodePack reads a pack batch: every series belongs to the pack's run,
// and is either one batch to predict with its records or a verdict.
func DecodePack(h nats.Header, data []byte) ([]PackSeries, error) {
	heads, blobs, err := decodeEntries(h, data)
	if err != nil {
		return nil, err
	}
	out := make([]PackSeries, len(heads))
	for i, hd := range heads {
		s := PackSeries{Meta: hd.Meta, Status: hd.Status, Message: hd.Message, Code: hd.Code, Context: blobs[i][0], Queries: blobs[i][1]}
		switch {
		case s.Status == "" && (hd.Batch != 0 || s.Meta.Batches != 1 || len(s.Context) == 0 || len(s.Queries) == 0):
			return nil, fmt.Errorf("pack series %s: a series to predict is one batch with its context and queries", s.Meta.TaskID)
		case s.Status != "" && (hd.Batch != VerdictBatch || s.Meta.Batches != 0 || s.Status != StatusSkipped && s.Status != StatusFailed):
			return nil, fmt.Errorf("pack series %s: verdict %q is not one", s.Meta.TaskID, s.Status)
		}
		out[i] = s
	}
	return out, nil
}

// NewResultPackMsg encodes the results of a pack batch (one per series,
// Batch 0 or VerdictBatch) for the results stream. The writer never needs
// the model-service key: no meta carries one.
func NewResultPackMsg(trigger, parent string, rs []Result) (*nats.Msg, error) {
	if len(rs) == 0 || len(rs) > MaxPackSeries {
		return nil, fmt.Errorf("pack of %d results (1 to %d)", len(rs), MaxPackSeries)
	}
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(rs)))
	for _, r := range rs {
		r.Meta.SealedKey = ""
		if r.Batch == VerdictBatch {
			r.Meta.Batches = 0
		}
		var data []byte
		if r.Status == StatusOK {
			data = r.Body
		}
		var err error
		if body, err = appendEntry(body, packHead{Meta: r.Meta, Batch: r.Batch, Status: r.Status, Message: r.Message,
			Code: r.Code, Rows: r.Rows, Outside: r.Outside}, data, nil); err != nil {
			return nil, err
		}
	}
	return packMsg(SubjectResults+SubjectToken(trigger), parent, len(rs), body), nil
}

// DecodeResultPack reads a pack result: one Result per series (Body the
// predictions of a StatusOK one), each checked as DecodeResult checks one.
func DecodeResultPack(h nats.Header, data []byte) ([]Result, error) {
	heads, blobs, err := decodeEntries(h, data)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(heads))
	for i, hd := range heads {
		r := Result{Meta: hd.Meta, Batch: hd.Batch, Status: hd.Status, Message: hd.Message, Code: hd.Code, Rows: hd.Rows, Outside: hd.Outside, Body: blobs[i][0]}
		if r.Batch < VerdictBatch || r.Batch >= max(r.Meta.Batches, 1) {
			return nil, fmt.Errorf("pack result %s: batch %d out of range", r.Meta.TaskID, r.Batch)
		}
		if !r.Status.result() {
			return nil, fmt.Errorf("pack result %s: status %q %w", r.Meta.TaskID, r.Status, ErrUnknownStatus)
		}
		if r.Outside < 0 || r.Outside > r.Rows {
			r.Outside = 0
		}
		out[i] = r
	}
	return out, nil
}

func packMsg(subject, parent string, n int, body []byte) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	m.Header.Set(HeaderSchema, Version)
	m.Header.Set(HeaderTask, parent)
	m.Header.Set(HeaderPack, strconv.Itoa(n))
	return m
}

func appendEntry(body []byte, hd packHead, a, b []byte) ([]byte, error) {
	head, err := json.Marshal(hd)
	if err != nil {
		return nil, fmt.Errorf("encode pack entry: %w", err)
	}
	for _, part := range [][]byte{head, a, b} {
		body = binary.AppendUvarint(body, uint64(len(part)))
		body = append(body, part...)
	}
	return body, nil
}

var errPackShape = errors.New("malformed pack")

// decodeEntries reads a pack's entries: heads and their two records each.
// Every entry must be a series of the pack's run, once.
func decodeEntries(h nats.Header, data []byte) ([]packHead, [][2][]byte, error) {
	parent := PackParent(h)
	n, err := strconv.Atoi(h.Get(HeaderPack))
	if err != nil || n < 1 || n > MaxPackSeries || parent == "" {
		return nil, nil, fmt.Errorf("pack header %q of run %q: %w", h.Get(HeaderPack), parent, errPackShape)
	}
	count, k := binary.Uvarint(data)
	if k <= 0 || count != uint64(n) {
		return nil, nil, fmt.Errorf("pack of %d series says %d: %w", n, count, errPackShape)
	}
	data = data[k:]
	next := func() ([]byte, error) {
		l, k := binary.Uvarint(data)
		if k <= 0 || l > uint64(len(data)-k) {
			return nil, errPackShape
		}
		part := data[k : k+int(l) : k+int(l)]
		data = data[k+int(l):]
		if len(part) == 0 {
			return nil, nil
		}
		return part, nil
	}
	heads := make([]packHead, n)
	blobs := make([][2][]byte, n)
	seen := make(map[string]bool, n)
	for i := range n {
		head, err := next()
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(head, &heads[i]); err != nil {
			return nil, nil, fmt.Errorf("pack entry %d: %w", i, err)
		}
		m := heads[i].Meta
		if m.TaskID == "" || m.Parent != parent || seen[m.TaskID] {
			return nil, nil, fmt.Errorf("pack entry %d: task %q of run %q in a pack of run %q: %w", i, m.TaskID, m.Parent, parent, errPackShape)
		}
		seen[m.TaskID] = true
		for j := range 2 {
			if blobs[i][j], err = next(); err != nil {
				return nil, nil, fmt.Errorf("pack entry %d: %w", i, err)
			}
		}
	}
	if len(data) != 0 {
		return nil, nil, fmt.Errorf("%d bytes past the pack's last series: %w", len(data), errPackShape)
	}
	return heads, blobs, nil
}
