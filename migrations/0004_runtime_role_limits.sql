-- 0004: what a runtime session may do to other tenants' sessions, and see of their activity.
--
-- Every runtime connection is the same role (primitives_app), so anything PUBLIC may run
-- reaches every tenant:
--   pg_terminate_backend / pg_cancel_backend   kill or cancel another tenant's backend
--   pg_advisory_*, pg_try_advisory_*            hold another tenant's journal or item lock
--                                               (the keys were derived from the tenant id)
--   pg_stat_* / pg_statio_* per-table views     every tenant's inserts, updates, row counts
--   and the pg_stat_get_*(oid) functions under them
-- This migration takes EXECUTE (functions) and SELECT (views) from PUBLIC in this database;
-- the owner role gets the advisory functions back, for the lock function below and for a
-- non-superuser admin (a member of the owner role) taking the migration lock.
--
-- Only a superuser may change privileges on built-in objects. A non-superuser admin gets a
-- WARNING, the rest of the migration applies, and `primitives doctor` keeps failing
-- (check runtime_functions) until a superuser applies these statements.
--
--   primitives.tenant_xact_lock(tenant, scope)  SECURITY DEFINER: a transaction advisory lock
--                                               on (tenant, scope), for the transaction's own
--                                               tenant only; the key is a sha256 of both
--   primitives.chain_event()                    takes its lock through it

DO $revoke$
DECLARE
    target text;
BEGIN
    IF NOT coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false) THEN
        RAISE WARNING '% is not a superuser: runtime roles keep EXECUTE on pg_terminate_backend, '
                      'pg_cancel_backend and the advisory lock functions, and SELECT on the '
                      'per-table statistics views, in database %. Ask a superuser to run the '
                      'first statement of migrations/0004_runtime_role_limits.sql in it; until '
                      'then `primitives doctor` fails (runtime_functions)',
                      current_user, pg_catalog.current_database();
        RETURN;
    END IF;

    FOR target IN
        SELECT p.oid::regprocedure::text
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace
          AND (p.proname IN ('pg_terminate_backend', 'pg_cancel_backend')
               OR p.proname ~ '^pg_(try_)?advisory_'
               OR (p.proname LIKE 'pg\_stat\_get\_%' AND p.pronargs = 1
                   AND p.proargtypes[0] = 'oid'::regtype))
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', target);
        IF target ~ '^pg_(try_)?advisory_' THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO primitives_owner', target);
        END IF;
    END LOOP;

    FOR target IN
        SELECT c.oid::regclass::text
        FROM pg_catalog.pg_class AS c
        WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'v'
          AND (c.relname ~ '^pg_stat(io)?_(all|user|sys|xact_all|xact_user|xact_sys)_(tables|indexes|sequences|functions)$'
               OR c.relname IN ('pg_stat_database', 'pg_stat_database_conflicts'))
    LOOP
        EXECUTE format('REVOKE SELECT ON %s FROM PUBLIC', target);
    END LOOP;
END
$revoke$;

SET LOCAL ROLE primitives_owner;

CREATE FUNCTION primitives.tenant_xact_lock(tenant text, scope text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- Runs as the owner, which may take advisory locks where the runtime roles may not: so
    -- the caller may lock only inside its own tenant. A superuser could take the lock anyway.
    IF tenant IS DISTINCT FROM primitives.current_tenant()
       AND NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r
                         WHERE r.rolname = session_user), false) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'a lock may be taken only for the tenant of the current transaction',
            HINT    = 'SET LOCAL primitives.tenant to the tenant first.';
    END IF;
    -- sha256, not hashtextextended: a 64-bit key that no one can aim at another key by
    -- choosing the text; the JSON array keeps (tenant, scope) pairs apart.
    PERFORM pg_catalog.pg_advisory_xact_lock(
        ('x' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
            pg_catalog.jsonb_build_array(tenant, scope)::text, 'UTF8')), 'hex'), 16))::bit(64)::bigint);
END
$fn$;

COMMENT ON FUNCTION primitives.tenant_xact_lock(text, text) IS
    'Transaction advisory lock on (tenant, scope), for the transaction''s own tenant only '
    '(SECURITY DEFINER: runtime roles may not call the advisory lock functions).';

REVOKE ALL ON FUNCTION primitives.tenant_xact_lock(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION primitives.tenant_xact_lock(text, text) TO primitives_app;


CREATE OR REPLACE FUNCTION primitives.chain_event() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    tenant_col   constant text := TG_ARGV[0];
    tenant_value text;
    last_seq     bigint;
    last_hash    text;
BEGIN
    IF TG_WHEN <> 'BEFORE' OR TG_OP <> 'INSERT' OR TG_LEVEL <> 'ROW' OR tenant_col IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('primitives.chain_event() on %I.%I must be a BEFORE INSERT FOR EACH ROW '
                             'trigger with the tenant column name as its argument',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;

    -- Under REPEATABLE READ a writer that waited for the lock below would still
    -- read the chain as of its snapshot and fork it; refuse instead.
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM004',
            MESSAGE = format('%I.%I: journal events are appended under READ COMMITTED only (this '
                             'transaction is %s), otherwise the hash chain could fork',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME,
                             pg_catalog.current_setting('transaction_isolation'));
    END IF;

    EXECUTE format('SELECT ($1).%I::text', tenant_col) INTO tenant_value USING NEW;
    IF tenant_value IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'not_null_violation',
            MESSAGE = format('%I.%I: the tenant column %I must be set on every journal event',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME, tenant_col);
    END IF;

    -- One writer per (journal, tenant) at a time, until commit or rollback.
    PERFORM primitives.tenant_xact_lock(tenant_value, 'journal ' || TG_RELID::text);

    EXECUTE format('SELECT seq, hash FROM %I.%I WHERE %I = ($1).%I ORDER BY seq DESC LIMIT 1',
                   TG_TABLE_SCHEMA, TG_TABLE_NAME, tenant_col, tenant_col)
        INTO last_seq, last_hash USING NEW;

    NEW.seq         := coalesce(last_seq, 0) + 1;
    NEW.prev_hash   := coalesce(last_hash, repeat('0', 64));
    NEW.occurred_at := coalesce(NEW.occurred_at, now());
    NEW.payload     := coalesce(NEW.payload, '{}'::jsonb);
    NEW.hash        := primitives.event_hash(NEW.prev_hash, NEW.seq, NEW.kind, NEW.memory_id,
                                             NEW.actor, NEW.payload, NEW.occurred_at);
    RETURN NEW;
END
$fn$;
