-- How far an attempt got. A worker records a checkpoint with its heartbeat (Job Lease → Extend
-- Lease) right before a call with an external effect, such as creating the CRM record. When the
-- attempt then dies without an outcome, Unknown Outcomes shows whether it passed that point:
-- with a checkpoint the external call may have happened (check the external system before
-- replaying), without one it was never made. Unindexed columns, so recording one is a HOT
-- update of the attempt row (fillfactor 50, migration 0004).
ALTER TABLE {{schema}}.job_attempts
	ADD COLUMN checkpoint text CHECK (char_length(checkpoint) <= 100),
	ADD COLUMN checkpoint_at timestamptz;
