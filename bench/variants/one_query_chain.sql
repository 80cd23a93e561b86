-- The chain trigger with the last event's lookup, the new event's seq, prev_hash, time and
-- payload defaults and its hash in one query, in place of a query and five assignments
-- (PL/pgSQL sets up each assignment's expression again in every transaction). The rest of
-- the compiled trigger (its checks and lock) stays as the plan wrote it.
DO $$
DECLARE
    body text := pg_catalog.pg_get_functiondef('{schema}.{variant}_chain_event'::regproc);
    steps text := '(SELECT e\.seq, e\.hash INTO last_seq, last_hash.*?NEW\.occurred_at\);)';
    one text := $one$SELECT c.seq, c.prev, c.occ, c.pay,
           primitives.event_hash(c.prev, c.seq, NEW.kind, NEW.memory_id, NEW.actor, c.pay, c.occ)
    INTO NEW.seq, NEW.prev_hash, NEW.occurred_at, NEW.payload, NEW.hash
    FROM (SELECT coalesce(l.seq, 0) + 1 AS seq, coalesce(l.hash, repeat('0', 64)) AS prev,
                 coalesce(NEW.occurred_at, now()) AS occ,
                 coalesce(NEW.payload, '{}'::jsonb) AS pay
          FROM (SELECT 1) AS one
          LEFT JOIN LATERAL (SELECT e.seq, e.hash FROM {schema}.{variant}_memory_events AS e
                             WHERE e.workspace_id = NEW.workspace_id
                             ORDER BY e.seq DESC LIMIT 1) AS l ON true) AS c;$one$;
BEGIN
    IF body !~ steps THEN
        RAISE EXCEPTION 'the chain trigger no longer has the steps this variant folds together';
    END IF;
    EXECUTE pg_catalog.regexp_replace(body, steps, one);
END $$;
