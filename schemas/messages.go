package schemas

import (
	"encoding/json"
	"sync"
	"time"
)

// RunArgs are a trigger's arguments after parsing and defaulting: everything
// the producer needs to run a task. Durations are in the units their names say.
type RunArgs struct {
	Measurement      string            `json:"measurement"`
	Field            string            `json:"field"`
	FeatureFields    []string          `json:"feature_fields"`
	Model            string            `json:"model"`
	Tags             map[string]string `json:"tags,omitempty"`
	Window           Duration          `json:"window"`
	MinHistory       int               `json:"min_history"`
	MaxTrainRows     int               `json:"max_train_rows"`
	SkipExisting     bool              `json:"skip_existing"`
	PredictBatchSize int               `json:"predict_batch_size"`
	RequestTimeout   Duration          `json:"request_timeout"`
	MaxPredictRows   int               `json:"max_predict_rows"`
	MaxReadRows      int               `json:"max_read_rows"`
	MaxRetries       int               `json:"max_retries"`
	// OutputMeasurement is the table predictions go to; empty:
	// <measurement>_regressed. OutputSchema is its PostgreSQL schema (the
	// plugin's target_database); empty: the database's current schema.
	OutputMeasurement string `json:"output_measurement,omitempty"`
	OutputSchema      string `json:"output_schema,omitempty"`
	// Quantiles are the levels whose predictive quantiles are written
	// beside the point, one column each (QuantileColumn); nil: none.
	Quantiles []float64 `json:"quantiles,omitempty"`
	// LargeContext routes a large context (large_context_*); nil: the
	// whole context in one engine call.
	LargeContext *LargeContext `json:"large_context,omitempty"`
	// GroupBy are the tag columns whose value combinations are the run's
	// series (group_by); none: the run fits one series.
	// MaxRunPredictRows caps the query rows of all the series together.
	GroupBy           []string `json:"group_by,omitempty"`
	MaxRunPredictRows int      `json:"max_run_predict_rows,omitempty"`
}

// MaxRetriesLimit is the largest max_retries a trigger may set: attempts
// per gateway call and per write, end to end across the pipeline's
// redeliveries, which the consumers' delivery limits leave room for.
const MaxRetriesLimit = 20

// Job asks the producer to run one task: one trigger over one window.
type Job struct {
	Schema  string    `json:"schema"`
	TaskID  string    `json:"task_id"`
	Trigger string    `json:"trigger"`
	Args    RunArgs   `json:"args"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	DryRun  bool      `json:"dry_run,omitempty"`
	// Origin says what started the run: "webhook", "schedule" or "replay".
	Origin string `json:"origin"`
	// SealedKey is the model-service key sealed for the workers (never plain).
	SealedKey string    `json:"sealed_key,omitempty"`
	Requested time.Time `json:"requested"`

	// KeyID is the model-service key's id (Sealer.KeyID), never the key:
	// it joins the job's deduplication key, so that a run under one key
	// never answers a request under another. Not sent.
	KeyID string `json:"-"`
	// Seal, when set, seals the key for the task id the job is published
	// under (the publisher knows it only then) into SealedKey. Not sent.
	Seal func(taskID string) (string, error) `json:"-"`
}

// MsgID is the job's message id (JobMsgID) with its key's id: the runs
// of one window under two keys are two runs.
func (j Job) MsgID(runID string) string {
	id := JobMsgID(j.Trigger, j.Args, j.Start, j.End, runID, j.DryRun)
	if j.KeyID != "" {
		id += "|key:" + j.KeyID
	}
	return id
}

// TaskMeta travels in the HeaderTask header of every batch and result of a
// task, so each role can act on a message alone.
type TaskMeta struct {
	TaskID      string `json:"task_id"`
	Trigger     string `json:"trigger"`
	Measurement string `json:"measurement"`
	Target      string `json:"target"`
	Model       string `json:"model"`
	// Output and OutputSchema name the table predictions go to (RunArgs'
	// OutputMeasurement and OutputSchema); empty: <measurement>_regressed.
	Output       string            `json:"output,omitempty"`
	OutputSchema string            `json:"output_schema,omitempty"`
	Features     []string          `json:"features"`
	TagColumns   []string          `json:"tag_columns,omitempty"`
	Series       map[string]string `json:"series,omitempty"`
	Start        time.Time         `json:"start"`
	End          time.Time         `json:"end"`
	DryRun       bool              `json:"dry_run,omitempty"`
	Origin       string            `json:"origin,omitempty"`
	// Requested is when the task's job was published (Job.Requested), for
	// the task's end-to-end latency; zero from an older producer.
	Requested time.Time `json:"requested,omitzero"`
	// SkipExisting keeps a prediction already written (by a task running
	// beside this one) instead of replacing it, and does not count it.
	SkipExisting bool `json:"skip_existing,omitempty"`
	// Parent is the group_by run a series' task belongs to; SeriesTotal
	// is, on a parent's announcement (StatusSeries), its number of series.
	Parent      string `json:"parent,omitempty"`
	SeriesTotal int    `json:"series_total,omitempty"`

	// Batches is the number of query batches of the task; 0 when the task ended
	// in the producer (skipped or failed before any model call).
	Batches       int    `json:"batches"`
	ContextDigest string `json:"context_digest,omitempty"`
	// ContextNUID names the stored context's chunks and ContextChunks counts
	// them, so that whoever reads or forgets the context need not look it
	// up first.
	ContextNUID    string `json:"context_nuid,omitempty"`
	ContextChunks  int    `json:"context_chunks,omitempty"`
	ContextRows    int    `json:"context_rows"`
	QueryRows      int    `json:"query_rows"`
	ReadRows       int    `json:"read_rows"`
	ReadTruncated  bool   `json:"read_truncated,omitempty"`
	SkippedExists  int    `json:"skipped_existing,omitempty"`
	DroppedQueries int    `json:"dropped_queries,omitempty"`

	MaxRetries     int      `json:"max_retries"`
	RequestTimeout Duration `json:"request_timeout"`
	SealedKey      string   `json:"sealed_key,omitempty"`

	// Quantiles and LargeContext are the run's (RunArgs').
	Quantiles    []float64     `json:"quantiles,omitempty"`
	LargeContext *LargeContext `json:"large_context,omitempty"`
}

// Prediction is one query row of a dry run and its prediction; Value is
// nil where the model gave none.
type Prediction struct {
	Time  time.Time `json:"time"`
	Value *float64  `json:"value"`
	// Quantiles are the row's quantiles by column name (p10, p90, …) when
	// the trigger asks for quantiles; nil where the model gave none.
	Quantiles map[string]*float64 `json:"quantiles,omitempty"`
}

// TaskSummary is a task's state in the regress_tasks bucket, written by the
// writer after every committed result; the engine endpoint answers from it.
type TaskSummary struct {
	TaskID  string `json:"task_id"`
	Trigger string `json:"trigger"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
	// Code is the HTTP status a failed task answers with: 4xx when the
	// caller's input was at fault, 5xx when regressd or the model was.
	Code            int          `json:"code,omitempty"`
	Written         int          `json:"written"`
	Batches         int          `json:"batches"`
	BatchesDone     int          `json:"batches_done"`
	BatchesFailed   int          `json:"batches_failed"`
	Remaining       int          `json:"remaining"`
	ContextRows     int          `json:"context_rows"`
	QueryRows       int          `json:"query_rows"`
	ReadRows        int          `json:"read_rows"`
	ReadTruncated   bool         `json:"read_truncated,omitempty"`
	SkippedExisting int          `json:"skipped_existing,omitempty"`
	Start           time.Time    `json:"window_start"`
	End             time.Time    `json:"window_end"`
	Model           string       `json:"model,omitempty"`
	Predictions     []Prediction `json:"predictions,omitempty"`
	// Series is a group_by run's series by outcome, and SeriesResults the
	// first MaxInlineSeries of them (every one in a dry run).
	Series        *SeriesCounts  `json:"series,omitempty"`
	SeriesResults []SeriesResult `json:"series_results,omitempty"`
	Updated       time.Time      `json:"updated"`

	// OutsideRange counts the predicted query rows that lay outside the
	// context's range (beyond a column's range, or far from every context
	// row), where a prediction is an extrapolation.
	OutsideRange int `json:"outside_range"`
}

// Done reports whether the task reached a final status.
func (s TaskSummary) Done() bool { return s.Status.Done() }

// TaskMetas decodes task headers (HeaderTask), remembering the last few
// hundred: every batch and result of a task carries the same header, and
// decoding its JSON cost more than the rest of a batch's handling. The
// zero value is ready; it is safe for concurrent use.
type TaskMetas struct {
	mu sync.Mutex
	m  map[string]TaskMeta
}

// maxTaskMetas bounds the headers a TaskMetas remembers.
const maxTaskMetas = 256

// Decode returns the TaskMeta of a task header. Metas decoded from one
// header share their slices and maps: callers must not modify them.
func (c *TaskMetas) Decode(hdr string) (TaskMeta, error) {
	c.mu.Lock()
	m, ok := c.m[hdr]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	if err := json.Unmarshal([]byte(hdr), &m); err != nil {
		return TaskMeta{}, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxTaskMetas {
		c.m = make(map[string]TaskMeta, maxTaskMetas)
	}
	c.m[hdr] = m
	c.mu.Unlock()
	return m, nil
}
