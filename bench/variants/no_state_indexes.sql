-- The memories table without its recency, scope, superseded-by and expiry indexes (partial
-- btrees; the primary key, current-key and full-text indexes stay): an upper bound on what
-- they cost a write. Measurement only: retrieval, scope ends and expiry read them.
DROP INDEX {schema}.{variant}_memories_recent_idx;
DROP INDEX {schema}.{variant}_memories_scope_idx;
DROP INDEX {schema}.{variant}_memories_superseded_by_idx;
DROP INDEX {schema}.{variant}_memories_expires_idx;
