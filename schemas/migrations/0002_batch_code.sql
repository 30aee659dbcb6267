-- The HTTP status a failed batch's cause asks for (a hosted gateway's
-- refusal that is the caller's to fix); 0 for the model side's trouble.
ALTER TABLE regressd_task_batches ADD COLUMN IF NOT EXISTS code integer NOT NULL DEFAULT 0;
