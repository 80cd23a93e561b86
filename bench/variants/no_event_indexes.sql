-- The journal without its by-memory and rare-kind indexes (its primary key and event id key
-- stay): an upper bound on what they cost a write. Measurement only: the audit views and a
-- memory's lineage read them.
DROP INDEX {schema}.{variant}_memory_events_memory_idx;
DROP INDEX {schema}.{variant}_memory_events_kind_rare_idx;
