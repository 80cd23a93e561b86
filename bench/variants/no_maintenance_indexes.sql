-- The memories table without the maintenance passes' partial indexes
-- (primitives/compile/_maintenance_idx.py: corroboration due, dispositions, evidence): an
-- upper bound on what they cost a write. Measurement only: the passes find their rows by them.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i
             JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
             WHERE i.indrelid = '{schema}.{variant}_memories'::regclass
               AND c.relname ~ '^{variant}_memories_(corroboration_due|dispositions|evidence)_'
    LOOP
        EXECUTE pg_catalog.format('DROP INDEX {schema}.%I', r.relname);
    END LOOP;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the memories table has no maintenance index for this variant to drop';
    END IF;
END $$;
