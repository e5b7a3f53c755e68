-- Idempotency keys outlive the work they guard: a key is answered from here (New, Duplicate,
-- In Progress, Conflict) until expires_at, whatever happened to any job.
CREATE TABLE {{schema}}.idempotency_keys (
	scope text NOT NULL,
	key text NOT NULL CHECK (char_length(key) <= 255),
	fingerprint text,
	status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed')),
	claim_id uuid NOT NULL,
	claim_until timestamptz,
	prior_status text,
	claims integer NOT NULL DEFAULT 1,
	result jsonb,
	error_message text,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (scope, key)
);

CREATE INDEX idempotency_keys_expiry ON {{schema}}.idempotency_keys (expires_at);

-- Late-event guard: the newest version / occurred_at and state applied per entity.
CREATE TABLE {{schema}}.entity_versions (
	scope text NOT NULL,
	entity_key text NOT NULL,
	version numeric,
	occurred_at timestamptz,
	state text,
	state_rank integer,
	event_key text,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (scope, entity_key)
);
