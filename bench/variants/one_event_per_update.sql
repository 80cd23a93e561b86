-- A changed value's superseded and conflict_resolved events not appended (the chain trigger
-- drops them), so the update journals only its observed event: an upper bound on what one
-- event per update instead of three would save. Measurement only: the superseded row's
-- change and the conflict strategy's work would go unjournalled.
DO $$
DECLARE
    body text := pg_catalog.pg_get_functiondef('{schema}.{variant}_chain_event'::regproc);
    head text := E'BEGIN\n    -- Under REPEATABLE READ';
BEGIN
    IF pg_catalog.strpos(body, head) = 0 THEN
        RAISE EXCEPTION 'the chain trigger no longer starts as this variant expects';
    END IF;
    EXECUTE pg_catalog.replace(body, head, E'BEGIN\n    IF NEW.kind IN (''superseded'', '
        '''conflict_resolved'') THEN\n        RETURN NULL;\n    END IF;\n    -- Under REPEATABLE READ');
END $$;
