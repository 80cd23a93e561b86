-- The chain trigger without its per-tenant lock (primitives.tenant_xact_lock): an upper bound
-- on what taking the lock costs each journal event. Measurement only: without the lock,
-- concurrent writers of one tenant would collide on the journal's (tenant, seq) key.
DO $$
DECLARE
    body text := pg_catalog.pg_get_functiondef('{schema}.{variant}_chain_event'::regproc);
BEGIN
    IF pg_catalog.strpos(body, 'PERFORM primitives.tenant_xact_lock') = 0 THEN
        RAISE EXCEPTION 'the chain trigger no longer takes the lock as this variant expects';
    END IF;
    EXECUTE pg_catalog.regexp_replace(body, 'PERFORM primitives\.tenant_xact_lock\([^;]*\);', '');
END $$;
