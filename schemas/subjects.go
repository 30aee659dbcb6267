package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Version is the schema version every message carries in HeaderSchema.
// A consumer refuses (dead-letters) a message of any other version: a
// change an older role would misread takes a new version. 2 added packs
// (pack.go), which a role of version 1 reads as malformed batches.
const Version = "2"

// Stream, bucket and object store names.
const (
	StreamJobs    = "REGRESS_JOBS"
	StreamBatches = "REGRESS_BATCHES"
	StreamResults = "REGRESS_RESULTS"
	StreamDLQ     = "REGRESS_DLQ"

	BucketTriggers = "regress_triggers"
	BucketTasks    = "regress_tasks"
	StoreContext   = "regress_context"
)

// ContextObject names a task's context in StoreContext; its metadata holds
// the task's stored plan (see the producer). It is per task, so it can be
// forgotten when its task no longer needs it.
func ContextObject(taskID string) string { return "context/" + taskID }

// ContextDigest is the digest of an encoded context (TaskMeta's
// ContextDigest): it keys the workers' and the engine's caches, and a
// worker checks a context it reads against it.
func ContextDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Subject prefixes; the trigger name is the last token.
const (
	SubjectJobs    = "regress.jobs."
	SubjectBatches = "regress.batches."
	SubjectResults = "regress.results."
	SubjectDLQ     = "regress.dlq."
)

// Message headers.
const (
	HeaderSchema = "Regressd-Schema"
	HeaderTask   = "Regressd-Task"
	HeaderBatch  = "Regressd-Batch"
	HeaderReason = "Regressd-Reason"
	HeaderOrigin = "Regressd-Origin"
	// HeaderStatus is a result's Status; HeaderMessage says why it failed
	// or was skipped.
	HeaderStatus  = "Regressd-Status"
	HeaderMessage = "Regressd-Message"
	// HeaderCode is the HTTP status a caller should see for a verdict or a
	// failed batch, when the failure is the caller's to fix.
	HeaderCode = "Regressd-Code"
	// HeaderRows is the number of query rows a result answers.
	HeaderRows = "Regressd-Rows"
)

// SubjectToken makes a trigger name safe as one subject token: NATS tokens
// may not hold '.', '*', '>' or white space. Trigger names are validated to
// avoid these, so this is a guard, not an encoding users see.
func SubjectToken(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, name)
}

// JobMsgID is the deduplication id of a job: the same trigger, arguments and
// window published twice (two schedulers, a retried webhook) is one job. The
// arguments count because a request body may choose the series (tags) or
// columns: two series over one window are two jobs. RunID is set only for
// deliberate re-runs (replay).
func JobMsgID(trigger string, args RunArgs, start, end time.Time, runID string, dryRun bool) string {
	a, _ := json.Marshal(args) // map keys marshal sorted: stable
	sum := sha256.Sum256(a)
	id := trigger + "|" + hex.EncodeToString(sum[:8]) + "|" + start.UTC().Format(time.RFC3339Nano) + "|" + end.UTC().Format(time.RFC3339Nano)
	if runID != "" {
		id += "|" + runID
	}
	if dryRun {
		id += "|dry"
	}
	return id
}

// TaskID derives the task id from a job's message id, so a deduplicated
// publish still tells the caller which task to wait for.
func TaskID(msgID string) string {
	sum := sha256.Sum256([]byte(msgID))
	return "t_" + hex.EncodeToString(sum[:10])
}
