-- The jobs dashboard (Job Status → List Jobs) lists jobs newest first, filtered by queue, status,
-- creation time and text, with keyset pagination on (created_at, seq). Almost every retained row
-- is finished, so the two indexes below hold finished jobs only:
--
-- * jobs_history: one ordered range per (queue, status), read backwards from the cursor. A list
--   over several queues or statuses merges those ranges (each read up to one page).
-- * jobs_history_correlation: the text search by correlation id.
--
-- Both are partial on the terminal statuses, so enqueue and lease never write to them; a
-- complete adds one entry to each (the second only for jobs with a correlation id). Queued and
-- running jobs are listed through the partial indexes the lease already keeps (jobs_queued_claim,
-- jobs_running), like Queue Stats counts them; idempotency keys through jobs_idempotency.
--
-- Building them takes a lock that blocks writes to jobs while it runs (seconds per million rows).
-- On a large table, create them first with CREATE INDEX CONCURRENTLY and the same names and
-- definitions; this migration then leaves them as they are.
CREATE INDEX IF NOT EXISTS jobs_history ON {{schema}}.jobs (queue, status, created_at, seq)
	WHERE status IN ('done', 'failed', 'cancelled');

CREATE INDEX IF NOT EXISTS jobs_history_correlation ON {{schema}}.jobs (correlation_id)
	WHERE correlation_id IS NOT NULL AND status IN ('done', 'failed', 'cancelled');
