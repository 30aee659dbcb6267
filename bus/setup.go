package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// Config sizes the streams. Zero values take the defaults.
type Config struct {
	// Replicas of every stream and bucket: 1 on one machine, 3 in a cluster.
	Replicas int
	// JobsMaxAge is the backfill horizon: how long REGRESS_JOBS keeps jobs for
	// replay. Default 90 days.
	JobsMaxAge time.Duration
	// DuplicateWindow is how long a message id dedupes (jobs, batches,
	// results). Default 2 minutes, NATS's own default: it covers a job
	// published twice by two schedulers or a retried webhook, and a
	// producer's redelivered job re-publishing its stored plan; past it the
	// writer's ledger still writes each batch once. Every id is held in the
	// server's memory for the window.
	DuplicateWindow time.Duration
	// ContextTTL bounds how long a task's context and the plan stored with it
	// stay in the object store. Default 24h. They are forgotten sooner, once
	// every batch of the task is written; a task with failed batches keeps
	// its context this long for 'dlq retry'.
	ContextTTL time.Duration
	// TaskTTL is how long a task summary stays in the regress_tasks bucket
	// after its last update. Default 1 minute: the bucket is the live view
	// that engine calls wait on, and every key costs server memory; the
	// writer's ledger in PostgreSQL is the record, which the task endpoint
	// reads once a summary has expired.
	TaskTTL time.Duration
}

func (c *Config) setDefaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.JobsMaxAge == 0 {
		c.JobsMaxAge = 90 * 24 * time.Hour
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.ContextTTL == 0 {
		c.ContextTTL = 24 * time.Hour
	}
	if c.TaskTTL == 0 {
		c.TaskTTL = time.Minute
	}
}

// Ensure creates or updates every stream, bucket and store regressd uses. It
// is idempotent and runs at every start of every role.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg.setDefaults()
	streams := []jetstream.StreamConfig{
		{
			Name: schemas.StreamJobs, Subjects: []string{schemas.SubjectJobs + ">"},
			Retention: jetstream.LimitsPolicy, MaxAge: cfg.JobsMaxAge, Duplicates: cfg.DuplicateWindow,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
			Description: "one message per task; kept for replay (backfill)",
		},
		{
			Name: schemas.StreamBatches, Subjects: []string{schemas.SubjectBatches + ">"},
			Retention: jetstream.WorkQueuePolicy, Duplicates: cfg.DuplicateWindow, MaxAge: 7 * 24 * time.Hour,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
			Description: "query batches waiting for a worker",
		},
		{
			Name: schemas.StreamResults, Subjects: []string{schemas.SubjectResults + ">"},
			Retention: jetstream.WorkQueuePolicy, Duplicates: cfg.DuplicateWindow, MaxAge: 7 * 24 * time.Hour,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
			Description: "predictions and task verdicts waiting for the writer",
		},
		{
			Name: schemas.StreamDLQ, Subjects: []string{schemas.SubjectDLQ + ">"},
			Retention: jetstream.LimitsPolicy, MaxAge: 30 * 24 * time.Hour, Duplicates: cfg.DuplicateWindow,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
			Description: "messages that could not be processed, with the reason",
		},
		{
			Name: StreamAdvisories, Subjects: advisorySubjects(),
			Retention: jetstream.LimitsPolicy, MaxAge: 7 * 24 * time.Hour,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
			Description: "the server's max-deliveries advisories, until the DLQ holds the messages they name",
		},
	}
	for _, sc := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	kvs := []jetstream.KeyValueConfig{
		{Bucket: schemas.BucketTriggers, History: 5, Replicas: cfg.Replicas, Storage: jetstream.FileStorage, Description: "trigger definitions"},
		{Bucket: schemas.BucketTasks, History: 1, TTL: cfg.TaskTTL, Replicas: cfg.Replicas, Storage: jetstream.FileStorage, MaxValueSize: 1_000_000, Description: "task summaries"},
		{Bucket: schemas.BucketStatus, History: 1, TTL: schemas.StatusTTL, Replicas: cfg.Replicas, Storage: jetstream.FileStorage, MaxValueSize: 4096, Description: "live state of the roles (each worker's breaker)"},
	}
	for _, kc := range kvs {
		if _, err := js.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
		}
	}
	if _, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: schemas.StoreContext, TTL: cfg.ContextTTL, Replicas: cfg.Replicas,
		Storage: jetstream.FileStorage, Description: "Arrow IPC of task contexts, by digest",
	}); err != nil {
		return fmt.Errorf("ensure object store %s: %w", schemas.StoreContext, err)
	}
	return nil
}

// IsNotFound reports whether err means a key, object or stream does not exist.
func IsNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrObjectNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrMsgNotFound)
}
