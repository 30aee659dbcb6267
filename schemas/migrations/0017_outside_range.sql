-- Query rows predicted outside the context's range (beyond a column's
-- range, or far from every context row): per batch, and summed per task.
ALTER TABLE regressd_task_batches ADD COLUMN IF NOT EXISTS outside integer NOT NULL DEFAULT 0;
ALTER TABLE regressd_tasks ADD COLUMN IF NOT EXISTS outside_range bigint NOT NULL DEFAULT 0;
