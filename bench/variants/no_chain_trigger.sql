-- The chain trigger doing nothing of the chain: no checks, no lock, no lookup of the last
-- event, no hash; seq drawn at random. An upper bound on what the whole trigger costs a write.
-- Measurement only: the journal is no chain without it.
CREATE OR REPLACE FUNCTION {schema}.{variant}_chain_event() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    NEW.seq := (pg_catalog.random() * 9e18)::bigint;
    NEW.prev_hash := '0';
    NEW.hash := '1';
    RETURN NEW;
END
$fn$;
