-- Queue stats must not read the retained finished rows. It counts queued and running jobs, which
-- the partial indexes jobs_queued_claim and jobs_running hold and nothing else does, so an index
-- scan reads only live jobs however many finished ones the table keeps. The planner chooses by
-- the table's statistics, though: a queue last analysed while it had a large backlog is
-- estimated to have that backlog still, and the stats query then becomes a sequential scan of
-- the whole table (24,000 rows read to count 0 queued jobs in the queue-health benchmark; a
-- full read of every retained row at 1,000,000). A sequential scan is never the better plan
-- here, because the partial indexes are never larger than the live part of the table, so the
-- function turns it off for its own statements, as it does JIT.
ALTER FUNCTION {{schema}}.queue_stats(text) SET enable_seqscan = off;
