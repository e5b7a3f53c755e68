-- Unknown Outcomes and the reconciliation report read the attempts whose lease expired, newest
-- first. Every attempt that does not end in success keeps a record (0009, 0012), so the records
-- of failed, retried and released attempts pile up beside the few expired ones, and the query
-- read all of them and sorted what it kept. This index holds the expired attempts only: the
-- query reads them newest first and stops at its limit. A lease expiry writes one entry; no
-- other attempt touches it.
--
-- On a large job_attempt_records table, build it first with CREATE INDEX CONCURRENTLY and this
-- name and definition, so that the migration finds it and does not lock the table for writes
-- while it builds.
CREATE INDEX IF NOT EXISTS job_attempt_records_lease_expired
	ON {{schema}}.job_attempt_records (started_at DESC)
	WHERE outcome = 'lease_expired';
