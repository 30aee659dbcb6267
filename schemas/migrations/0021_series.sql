-- Many series in one run (group_by): each series is a task of its own whose
-- parent_id names the run's task; series holds its tags. A parent knows how
-- many series it split into (series_total) from its announcement.
ALTER TABLE regressd_tasks ADD COLUMN IF NOT EXISTS parent_id text NOT NULL DEFAULT '';
ALTER TABLE regressd_tasks ADD COLUMN IF NOT EXISTS series jsonb;
ALTER TABLE regressd_tasks ADD COLUMN IF NOT EXISTS series_total integer NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS regressd_tasks_parent_idx ON regressd_tasks (parent_id) WHERE parent_id <> '';
-- A series task is counted once into its parent's series_ended when it
-- ends (series_counted), so the parent settles when the count reaches
-- series_total without scanning its series on every result.
ALTER TABLE regressd_tasks ADD COLUMN IF NOT EXISTS series_counted boolean NOT NULL DEFAULT false;
ALTER TABLE regressd_tasks ADD COLUMN IF NOT EXISTS series_ended integer NOT NULL DEFAULT 0;
