-- Without the (tenant, tsv) full-text GIN index: an upper bound on what keeping it costs a
-- write. Measurement only: the lexical signal needs the index.
DROP INDEX {schema}.{variant}_memories_tsv_match_idx;
