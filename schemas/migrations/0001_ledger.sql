-- The task ledger. The writer commits predictions and these rows in one
-- transaction, so a redelivered result finds its batch row and does nothing.
CREATE TABLE IF NOT EXISTS regressd_tasks (
    task_id          text PRIMARY KEY,
    trigger_name     text        NOT NULL,
    measurement      text        NOT NULL,
    target           text        NOT NULL,
    model            text        NOT NULL,
    window_start     timestamptz NOT NULL,
    window_end       timestamptz NOT NULL,
    origin           text        NOT NULL DEFAULT '',
    dry_run          boolean     NOT NULL DEFAULT false,
    status           text        NOT NULL,
    message          text        NOT NULL DEFAULT '',
    code             integer     NOT NULL DEFAULT 0,
    batches          integer     NOT NULL,
    batches_done     integer     NOT NULL DEFAULT 0,
    batches_failed   integer     NOT NULL DEFAULT 0,
    written          bigint      NOT NULL DEFAULT 0,
    remaining        bigint      NOT NULL DEFAULT 0,
    context_rows     integer     NOT NULL DEFAULT 0,
    query_rows       integer     NOT NULL DEFAULT 0,
    read_rows        integer     NOT NULL DEFAULT 0,
    read_truncated   boolean     NOT NULL DEFAULT false,
    skipped_existing integer     NOT NULL DEFAULT 0,
    created          timestamptz NOT NULL DEFAULT now(),
    updated          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS regressd_tasks_trigger_idx ON regressd_tasks (trigger_name, created);

CREATE TABLE IF NOT EXISTS regressd_task_batches (
    task_id   text    NOT NULL REFERENCES regressd_tasks (task_id) ON DELETE CASCADE,
    batch_no  integer NOT NULL,
    status    text    NOT NULL,
    rows      integer NOT NULL DEFAULT 0,
    written   integer NOT NULL DEFAULT 0,
    message   text    NOT NULL DEFAULT '',
    preview   jsonb,
    committed timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, batch_no)
);
