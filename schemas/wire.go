package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// The inter-role messages, each with one encoder and one decoder that every
// role uses: a job (scheduler → producer), a batch (producer → worker) and a
// result (producer or worker → writer). Every message carries the schema
// Version in HeaderSchema and its task in HeaderTask: a bare task id on a
// job, the task's TaskMeta as JSON on a batch and a result.

// VerdictBatch is the batch number of a result that ends its task in the
// producer (a verdict), with no batches.
const VerdictBatch = -1

// ErrOtherVersion marks a job this build does not read: another schema
// version, or no task id. DecodeJob still returns what it read.
var ErrOtherVersion = errors.New("not a job this build reads")

// ErrUnknownStatus marks a result whose status is none a result carries.
var ErrUnknownStatus = errors.New("unknown")

// NewJobMsg encodes a job for the jobs stream; job.TaskID must be set. It
// sets job.Schema to Version.
func NewJobMsg(job Job) (*nats.Msg, error) {
	if job.TaskID == "" {
		return nil, errors.New("job without a task id")
	}
	job.Schema = Version
	body, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	m := &nats.Msg{Subject: SubjectJobs + SubjectToken(job.Trigger), Data: body, Header: nats.Header{}}
	m.Header.Set(HeaderSchema, Version)
	m.Header.Set(HeaderTask, job.TaskID)
	return m, nil
}

// DecodeJob reads a job's body; a body that is not a job of this schema
// version, or has no task id, is an error.
func DecodeJob(data []byte) (Job, error) {
	var job Job
	if err := json.Unmarshal(data, &job); err != nil {
		return job, fmt.Errorf("undecodable job: %w", err)
	}
	if job.Schema != Version || job.TaskID == "" {
		return job, fmt.Errorf("job schema %q with task id %q: %w", job.Schema, job.TaskID, ErrOtherVersion)
	}
	return job, nil
}

// EncodeTaskMeta is the HeaderTask value of a task's batches and results.
// It is encoded once per task and shared by its messages.
func EncodeTaskMeta(meta TaskMeta) (string, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return "", fmt.Errorf("encode task header: %w", err)
	}
	return string(b), nil
}

// NewBatchMsg is batch no of a task on the batches stream: hdr is the
// task's EncodeTaskMeta, body the batch's Arrow record (QuerySchema).
func NewBatchMsg(trigger, hdr string, no int, body []byte) *nats.Msg {
	m := &nats.Msg{Subject: SubjectBatches + SubjectToken(trigger), Data: body, Header: nats.Header{}}
	m.Header.Set(HeaderSchema, Version)
	m.Header.Set(HeaderTask, hdr)
	m.Header.Set(HeaderBatch, strconv.Itoa(no))
	return m
}

// BatchMsgID is the deduplication id of a task's batch no, and of its
// result.
func BatchMsgID(taskID string, no int) string { return taskID + ":" + strconv.Itoa(no) }

// DecodeBatch reads a batch's headers: its task and its number, which must
// be one of the task's batches.
func (c *TaskMetas) DecodeBatch(h nats.Header) (TaskMeta, int, error) {
	meta, err := c.decodeHeader(h)
	if err != nil {
		return meta, 0, fmt.Errorf("batch without a readable task header: %w", err)
	}
	no, err := strconv.Atoi(h.Get(HeaderBatch))
	if err != nil || no < 0 || no >= meta.Batches {
		return meta, 0, fmt.Errorf("batch number %q out of range", h.Get(HeaderBatch))
	}
	return meta, no, nil
}

// Result is a batch's outcome, or a task's verdict (Batch VerdictBatch).
type Result struct {
	Meta TaskMeta
	// Batch is the batch number, or VerdictBatch.
	Batch  int
	Status Status
	// Message says why the batch failed or the task was skipped.
	Message string
	// Code is the HTTP status a caller should see for a failure that is
	// the caller's to fix; 0 when none.
	Code int
	// Rows is the number of query rows the result answers.
	Rows int
	// Body is the predictions (an Arrow ResultSchemaFor(Meta.Quantiles)
	// record) when Status is StatusOK.
	Body []byte
	// Outside is the number of its query rows outside the context's range
	// (HeaderOutside); 0 when unknown (a remote predictor).
	Outside int
}

// NewResultMsg encodes a result for the results stream. The writer never
// needs the model-service key: the header carries none.
func NewResultMsg(r Result) (*nats.Msg, error) {
	r.Meta.SealedKey = ""
	if r.Batch == VerdictBatch {
		r.Meta.Batches = 0
	}
	hdr, err := EncodeTaskMeta(r.Meta)
	if err != nil {
		return nil, err
	}
	m := &nats.Msg{Subject: SubjectResults + SubjectToken(r.Meta.Trigger), Header: nats.Header{}}
	m.Header.Set(HeaderSchema, Version)
	m.Header.Set(HeaderTask, hdr)
	m.Header.Set(HeaderBatch, strconv.Itoa(r.Batch))
	m.Header.Set(HeaderStatus, string(r.Status))
	if r.Batch != VerdictBatch {
		m.Header.Set(HeaderRows, strconv.Itoa(r.Rows))
	}
	if r.Message != "" || r.Batch == VerdictBatch {
		m.Header.Set(HeaderMessage, r.Message)
	}
	if r.Code != 0 {
		m.Header.Set(HeaderCode, strconv.Itoa(r.Code))
	}
	if r.Outside > 0 {
		m.Header.Set(HeaderOutside, strconv.Itoa(r.Outside))
	}
	if r.Status == StatusOK {
		m.Data = r.Body
	}
	return m, nil
}

// DecodeResult reads a result's headers (Body is left to the caller, as
// data): its task, a batch number of the task or VerdictBatch, and its
// outcome. A result whose status is unknown is returned whole with an
// error wrapping ErrUnknownStatus.
func (c *TaskMetas) DecodeResult(h nats.Header) (Result, error) {
	var r Result
	var err error
	if r.Meta, err = c.decodeHeader(h); err != nil {
		return r, fmt.Errorf("result without a readable task header: %w", err)
	}
	if r.Batch, err = strconv.Atoi(h.Get(HeaderBatch)); err != nil || r.Batch < VerdictBatch || r.Batch >= max(r.Meta.Batches, 1) {
		return r, fmt.Errorf("result batch %q out of range", h.Get(HeaderBatch))
	}
	r.Status, r.Message = Status(h.Get(HeaderStatus)), h.Get(HeaderMessage)
	r.Code, _ = strconv.Atoi(h.Get(HeaderCode))
	r.Rows, _ = strconv.Atoi(h.Get(HeaderRows))
	if r.Outside, _ = strconv.Atoi(h.Get(HeaderOutside)); r.Outside < 0 || r.Outside > r.Rows {
		r.Outside = 0
	}
	if !r.Status.result() {
		return r, fmt.Errorf("result status %q %w", r.Status, ErrUnknownStatus)
	}
	return r, nil
}

func (c *TaskMetas) decodeHeader(h nats.Header) (TaskMeta, error) {
	meta, err := c.Decode(h.Get(HeaderTask))
	if err == nil && meta.TaskID == "" {
		err = errors.New("no task id")
	}
	return meta, err
}

// TaskIDOf is the task a message belongs to, for logs and the dead-letter
// queue: HeaderTask is a bare id on a job and a TaskMeta on a batch or a
// result. "" when there is none to read.
func TaskIDOf(h nats.Header) string {
	v := h.Get(HeaderTask)
	if !strings.HasPrefix(v, "{") {
		return v
	}
	var m struct {
		TaskID string `json:"task_id"`
	}
	json.Unmarshal([]byte(v), &m)
	return m.TaskID
}
