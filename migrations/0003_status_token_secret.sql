-- Status tokens are HMAC-SHA256(secret, job_id), so a client that retries an enqueue with the
-- same idempotency key and payload gets the same token back (it lost the first response);
-- only the token's SHA-256 is stored on the job. The secret comes from gen_random_uuid(),
-- which draws from PostgreSQL's cryptographically strong generator (244 random bits here).
CREATE TABLE {{schema}}.settings (
	name text PRIMARY KEY,
	value bytea NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO {{schema}}.settings (name, value)
VALUES ('status_token_secret', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
