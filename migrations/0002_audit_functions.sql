-- 0002: tenancy and audit functions, enforced in the database.
--
--   primitives.current_tenant()          the tenant of the current transaction, or NULL
--   primitives.event_hash(...)           the hash of one journal event (shared by chain and verify)
--   primitives.chain_event()             BEFORE INSERT row trigger: seq, prev_hash, hash per tenant
--   primitives.verify_chain(...)         re-walks one tenant's chain; first broken seq or NULL
--   primitives.refuse_journal_mutation() trigger: journals refuse UPDATE, DELETE, TRUNCATE
--   primitives.guard_memory_delete()     BEFORE DELETE row trigger: no hard delete of persistent
--                                        or action-linked memory
--
-- SQLSTATEs of our own (class PM, unused by PostgreSQL), mirrored in primitives/db/_names.py:
--   PM001  journal mutation refused (append-only)
--   PM002  delete of persistent-tier memory refused
--   PM003  delete of action-linked memory refused
--   PM004  journal insert outside READ COMMITTED refused (the chain could fork)
--
-- All functions are SECURITY INVOKER: they see what the caller sees, row-level
-- security included, so they work inside a tenant transaction as the app role.

SET LOCAL ROLE primitives_owner;

CREATE FUNCTION primitives.current_tenant() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
-- No SET clause and a single SELECT: the planner inlines it into RLS policies.
AS $$ SELECT nullif(pg_catalog.current_setting('primitives.tenant', true), '') $$;

COMMENT ON FUNCTION primitives.current_tenant() IS
    'The tenant set by SET LOCAL primitives.tenant in this transaction, or NULL.';


CREATE FUNCTION primitives.event_hash(
    prev_hash   text,
    seq         bigint,
    kind        text,
    memory_id   uuid,
    actor       text,
    payload     jsonb,
    occurred_at timestamptz
) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
-- prev_hash | canonical JSON array of the fields. A JSON array (not fields joined
-- by '|') keeps the encoding injective: no two events share a preimage because a
-- '|' moved from one text field into the next. jsonb text output is canonical
-- (key order and spacing are fixed), and the time is rendered in UTC with
-- microseconds, independent of the session's TimeZone.
AS $$
    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
        $1 || '|' || pg_catalog.jsonb_build_array(
            $2, $3, $4, $5, $6,
            pg_catalog.to_char($7 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        )::text,
        'UTF8')), 'hex')
$$;

COMMENT ON FUNCTION primitives.event_hash(text, bigint, text, uuid, text, jsonb, timestamptz) IS
    'sha256 hex of prev_hash || ''|'' || jsonb_build_array(seq, kind, memory_id, actor, payload, occurred_at as UTC ISO text).';


CREATE FUNCTION primitives.refuse_journal_mutation() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'PM001',
        MESSAGE = format('%s is append-only: %s refused on %I.%I',
                         TG_TABLE_NAME, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME),
        HINT    = 'Journal events are never changed or removed; append a new event instead.';
END
$fn$;

COMMENT ON FUNCTION primitives.refuse_journal_mutation() IS
    'Trigger (BEFORE UPDATE OR DELETE FOR EACH ROW, BEFORE TRUNCATE FOR EACH STATEMENT): raises SQLSTATE PM001.';


CREATE FUNCTION primitives.chain_event() RETURNS trigger
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
    -- Single-bigint keys: a separate space from the two-int4 migration lock.
    PERFORM pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended(TG_RELID::text || '|' || tenant_value, 0));

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

COMMENT ON FUNCTION primitives.chain_event() IS
    'Trigger (BEFORE INSERT FOR EACH ROW, argument: tenant column): sets seq, prev_hash, hash.';


CREATE FUNCTION primitives.verify_chain(journal regclass, tenant_col text, tenant text)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    tenant_type   text;
    r             record;
    expected_seq  bigint := 1;
    expected_prev text := repeat('0', 64);
BEGIN
    SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO tenant_type
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = journal AND a.attname = tenant_col AND a.attnum > 0 AND NOT a.attisdropped;
    IF tenant_type IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_column',
            MESSAGE = format('%s has no column %I', journal, tenant_col);
    END IF;

    -- tenant_type comes from format_type(), which quotes what needs quoting.
    FOR r IN EXECUTE format(
        'SELECT seq, prev_hash, hash, kind, memory_id, actor, payload, occurred_at '
        'FROM %s WHERE %I = $1::%s ORDER BY seq', journal, tenant_col, tenant_type)
        USING tenant
    LOOP
        IF r.seq IS DISTINCT FROM expected_seq
           OR r.prev_hash IS DISTINCT FROM expected_prev
           OR r.hash IS DISTINCT FROM primitives.event_hash(r.prev_hash, r.seq, r.kind, r.memory_id,
                                                            r.actor, r.payload, r.occurred_at)
        THEN
            -- a gap (deleted event) reports the missing seq; a duplicate reports itself
            RETURN least(r.seq, expected_seq);
        END IF;
        expected_seq  := r.seq + 1;
        expected_prev := r.hash;
    END LOOP;
    RETURN NULL;
END
$fn$;

COMMENT ON FUNCTION primitives.verify_chain(regclass, text, text) IS
    'Re-walks one tenant''s hash chain; returns the first seq that does not verify, or NULL. '
    'Sees what the caller sees: run it in a tenant transaction.';


CREATE FUNCTION primitives.guard_memory_delete() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    links         regclass;
    tenant_col    text;
    id_col        text;
    memory_key    text;
    is_persistent boolean := false;
    is_linked     boolean;
BEGIN
    IF TG_WHEN <> 'BEFORE' OR TG_OP <> 'DELETE' OR TG_LEVEL <> 'ROW' OR TG_NARGS < 2 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('primitives.guard_memory_delete() on %I.%I must be a BEFORE DELETE FOR EACH '
                             'ROW trigger with arguments (action-links table, tenant column [, id column])',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    links      := TG_ARGV[0]::regclass;
    tenant_col := TG_ARGV[1];
    id_col     := coalesce(TG_ARGV[2], 'id');

    EXECUTE format('SELECT ($1).%I::text', id_col) INTO memory_key USING OLD;

    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
               WHERE attrelid = TG_RELID AND attname = 'persistent' AND NOT attisdropped) THEN
        EXECUTE 'SELECT coalesce(($1).persistent, false)' INTO is_persistent USING OLD;
    END IF;
    IF is_persistent THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM002',
            MESSAGE = format('refusing to delete memory %s from %I.%I: it is persistent-tier memory, '
                             'which is never hard-deleted', memory_key, TG_TABLE_SCHEMA, TG_TABLE_NAME),
            HINT    = 'Supersede, archive or tombstone it; erasure goes through the governed erase path.';
    END IF;

    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s l WHERE l.%I = ($1).%I AND l.memory_id = ($1).%I)',
                   links, tenant_col, tenant_col, id_col)
        INTO is_linked USING OLD;
    IF is_linked THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM003',
            MESSAGE = format('refusing to delete memory %s from %I.%I: an action in %s is linked to it',
                             memory_key, TG_TABLE_SCHEMA, TG_TABLE_NAME, links),
            HINT    = 'Memory that justified an action stays provable; tombstone or archive it instead.';
    END IF;
    RETURN OLD;
END
$fn$;

COMMENT ON FUNCTION primitives.guard_memory_delete() IS
    'Trigger (BEFORE DELETE FOR EACH ROW, arguments: action-links table, tenant column [, id column, '
    'default id]): raises PM002 for persistent rows, PM003 for action-linked rows.';


-- Trigger functions need no EXECUTE grant to fire; only the owner attaches them.
GRANT EXECUTE ON FUNCTION
    primitives.current_tenant(),
    primitives.event_hash(text, bigint, text, uuid, text, jsonb, timestamptz),
    primitives.verify_chain(regclass, text, text)
TO primitives_app, primitives_auditor;
