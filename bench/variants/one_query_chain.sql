-- The chain trigger with the last event's lookup, the new event's seq, prev_hash, time and
-- payload defaults and its hash in one query, in place of a query and five assignments
-- (PL/pgSQL sets up each assignment's expression again in every transaction).
CREATE OR REPLACE FUNCTION {schema}.{variant}_chain_event() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM004',
            MESSAGE = format('%I.%I: journal events are appended under READ COMMITTED only (this '
                             'transaction is %s), otherwise the hash chain could fork',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME,
                             pg_catalog.current_setting('transaction_isolation'));
    END IF;
    IF NEW.workspace_id IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'not_null_violation',
            MESSAGE = format('%I.%I: the tenant column %I must be set on every journal event',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME, 'workspace_id');
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended(TG_RELID::text || '|' || NEW.workspace_id, 0));
    SELECT c.seq, c.prev, c.occ, c.pay,
           primitives.event_hash(c.prev, c.seq, NEW.kind, NEW.memory_id, NEW.actor, c.pay, c.occ)
    INTO NEW.seq, NEW.prev_hash, NEW.occurred_at, NEW.payload, NEW.hash
    FROM (SELECT coalesce(l.seq, 0) + 1 AS seq, coalesce(l.hash, repeat('0', 64)) AS prev,
                 coalesce(NEW.occurred_at, now()) AS occ,
                 coalesce(NEW.payload, '{}'::jsonb) AS pay
          FROM (SELECT 1) AS one
          LEFT JOIN LATERAL (SELECT e.seq, e.hash FROM {schema}.{variant}_memory_events AS e
                             WHERE e.workspace_id = NEW.workspace_id
                             ORDER BY e.seq DESC LIMIT 1) AS l ON true) AS c;
    RETURN NEW;
END
$fn$;
