-- primitives plan for agent 'mace': 291 statements
-- store mace.mace_*, tenant column user_id; extensions: trigram, btree_gin; leakproof full-text match

-- objects are owned by the owner role
SET LOCAL ROLE "primitives_owner";

-- schema mace
CREATE SCHEMA IF NOT EXISTS "mace" AUTHORIZATION "primitives_owner";

-- schema mace: usage for the runtime roles
GRANT USAGE ON SCHEMA "mace" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- schema langgraph
CREATE SCHEMA IF NOT EXISTS "langgraph" AUTHORIZATION "primitives_owner";

-- schema langgraph: usage for the runtime roles
GRANT USAGE ON SCHEMA "langgraph" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_memories: table
CREATE TABLE IF NOT EXISTS "mace"."mace_memories" (
    "user_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "tier" text NOT NULL,
    "typology" text NOT NULL,
    "persistent" boolean GENERATED ALWAYS AS ("tier" = 'long_term') STORED,
    "scope_id" text,
    "namespace" text[] NOT NULL DEFAULT '{}'::text[],
    "key" text NOT NULL,
    "content" text NOT NULL,
    "value" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "envelope" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "tags" text[] NOT NULL DEFAULT '{}'::text[],
    "provenance" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "tsv" tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, "content")) STORED,
    "confidence" real NOT NULL DEFAULT 1,
    "decay_rate" real,
    "access_count" integer NOT NULL DEFAULT 0,
    "last_accessed_at" timestamptz,
    "event_time" timestamptz NOT NULL DEFAULT now(),
    "created_at" timestamptz NOT NULL DEFAULT now(),
    "updated_at" timestamptz NOT NULL DEFAULT now(),
    "valid_from" timestamptz NOT NULL DEFAULT now(),
    "corroborated_at" timestamptz,
    "invalidated_at" timestamptz,
    "superseded_at" timestamptz,
    "superseded_by" uuid,
    "archived_at" timestamptz,
    "tombstoned_at" timestamptz,
    "erased_at" timestamptz,
    "erasure_reason" text,
    "expires_at" timestamptz,
    "ttl_ticks" integer,
    "source" text,
    "actor" text,
    "age_ticks" integer,
    "reference_ticks" integer[],
    CONSTRAINT "mace_memories_pkey" PRIMARY KEY ("user_id", "id")
);

-- mace.mace_memories: columns added since the table first shipped
ALTER TABLE "mace"."mace_memories" ADD COLUMN IF NOT EXISTS "corroborated_at" timestamptz, ADD COLUMN IF NOT EXISTS "age_ticks" integer, ADD COLUMN IF NOT EXISTS "reference_ticks" integer[];

-- mace.mace_memories: bounds function mace.mace_memories_bounds (its CHECKs, planned once per session)
CREATE OR REPLACE FUNCTION "mace"."mace_memories_bounds"("tier" text, "typology" text, "content" text, "value" jsonb, "envelope" jsonb, "provenance" jsonb, "confidence" real, "erased_at" timestamptz, "erasure_reason" text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $bounds$
BEGIN
    -- every bound at once: one expression, the common case
    IF ((tier IN ('wm', 'cwm', 'long_term'))
        AND ((tier || ':' || typology) = ANY ('{wm:episodic,cwm:episodic,long_term:episodic,long_term:semantic}'::text[]))
        AND (char_length(content) <= 4000)
        AND (octet_length("value"::text) <= 32768)
        AND (octet_length("envelope"::text) <= 8192)
        AND (octet_length("provenance"::text) <= 32768)
        AND (confidence BETWEEN 0 AND 1)
        AND (erased_at IS NULL OR erasure_reason IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- a bound is broken: fail as its own constraint would
    IF (tier IN ('wm', 'cwm', 'long_term')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_tier_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_tier_check"';
    END IF;
    IF ((tier || ':' || typology) = ANY ('{wm:episodic,cwm:episodic,long_term:episodic,long_term:semantic}'::text[])) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_typology_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_typology_check"';
    END IF;
    IF (char_length(content) <= 4000) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_content_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_content_check"';
    END IF;
    IF (octet_length("value"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_value_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_value_check"';
    END IF;
    IF (octet_length("envelope"::text) <= 8192) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_envelope_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_envelope_check"';
    END IF;
    IF (octet_length("provenance"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_provenance_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_provenance_check"';
    END IF;
    IF (confidence BETWEEN 0 AND 1) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_confidence_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_confidence_check"';
    END IF;
    IF (erased_at IS NULL OR erasure_reason IS NOT NULL) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'mace',
            TABLE = 'mace_memories', CONSTRAINT = 'mace_memories_erasure_check',
            MESSAGE = 'new row for relation "mace_memories" violates check constraint "mace_memories_erasure_check"';
    END IF;
    RETURN true;
END
$bounds$;

-- mace.mace_memories: bounds function: not callable by PUBLIC
REVOKE ALL ON FUNCTION "mace"."mace_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) FROM PUBLIC;

-- mace.mace_memories: bounds function: the app role writes the table
GRANT EXECUTE ON FUNCTION "mace"."mace_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_app";

-- mace.mace_memories: bounds function: the maintainer role writes the table
GRANT EXECUTE ON FUNCTION "mace"."mace_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_maintainer";

-- mace.mace_memories: checks (replaced, so they follow the spec)
ALTER TABLE "mace"."mace_memories"
    DROP CONSTRAINT IF EXISTS "mace_memories_tier_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_typology_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_content_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_value_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_envelope_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_provenance_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_confidence_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_erasure_check",
    DROP CONSTRAINT IF EXISTS "mace_memories_bounds_check",
    ADD CONSTRAINT "mace_memories_bounds_check" CHECK ("mace"."mace_memories_bounds"("tier", "typology", "content", "value", "envelope", "provenance", "confidence", "erased_at", "erasure_reason")) NOT VALID;

-- mace.mace_memories: drop index mace_memories_envelope_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "mace"."mace_memories_envelope_idx";

-- mace.mace_memories: drop index mace_memories_tags_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "mace"."mace_memories_tags_idx";

-- mace.mace_memories: index mace_memories_current_key
CREATE UNIQUE INDEX IF NOT EXISTS "mace_memories_current_key" ON "mace"."mace_memories" USING btree ("user_id", "tier", "namespace", "key") WHERE superseded_at IS NULL AND tombstoned_at IS NULL;

-- mace.mace_memories: index mace_memories_recent_idx
CREATE INDEX IF NOT EXISTS "mace_memories_recent_idx" ON "mace"."mace_memories" USING btree ("user_id", "tier", created_at DESC) WHERE "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- mace.mace_memories: index mace_memories_scope_idx
CREATE INDEX IF NOT EXISTS "mace_memories_scope_idx" ON "mace"."mace_memories" USING btree ("user_id", "scope_id", "tier") WHERE scope_id IS NOT NULL;

-- mace.mace_memories: index mace_memories_superseded_by_idx
CREATE INDEX IF NOT EXISTS "mace_memories_superseded_by_idx" ON "mace"."mace_memories" USING btree ("user_id", "superseded_by") WHERE superseded_by IS NOT NULL;

-- mace.mace_memories: index mace_memories_expires_idx
CREATE INDEX IF NOT EXISTS "mace_memories_expires_idx" ON "mace"."mace_memories" USING btree ("user_id", "expires_at") WHERE expires_at IS NOT NULL;

-- mace.mace_memories: drop index mace_memories_tsv_idx (replaced by mace_memories_tsv_match_idx)
DROP INDEX IF EXISTS "mace"."mace_memories_tsv_idx";

-- mace.mace_memories: index mace_memories_tsv_match_idx
CREATE INDEX IF NOT EXISTS "mace_memories_tsv_match_idx" ON "mace"."mace_memories" USING gin ("user_id", tsv primitives.tsvector_match_ops);

-- mace.mace_memories: function mace.mace_delete_transient (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "mace"."mace_delete_transient"(uuid) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "mace"."mace_memories" AS m WHERE m."user_id" = primitives.current_tenant() AND m.id = $1 RETURNING true
$fn$;

-- mace.mace_memories: function mace.mace_delete_transient: not callable by PUBLIC
REVOKE ALL ON FUNCTION "mace"."mace_delete_transient"(uuid) FROM PUBLIC;

-- mace.mace_memories: function mace.mace_delete_transient: callable by the app role
GRANT EXECUTE ON FUNCTION "mace"."mace_delete_transient"(uuid) TO "primitives_app";

-- mace.mace_memories: seeded uuid function mace.mace_seeded_uuid
CREATE OR REPLACE FUNCTION "mace"."mace_seeded_uuid"(name text) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN encode(set_byte(set_byte(substring(sha256(convert_to(name, 'UTF8')) FROM 1 FOR 16),
                                6, (get_byte(sha256(convert_to(name, 'UTF8')), 6) & 15) | 128),
                       8, (get_byte(sha256(convert_to(name, 'UTF8')), 8) & 63) | 128),
              'hex')::uuid;

-- mace.mace_memories: seeded uuid function mace.mace_seeded_uuid: callable by the roles that write the journal
GRANT EXECUTE ON FUNCTION "mace"."mace_seeded_uuid"(text) TO "primitives_app", "primitives_maintainer", "primitives_privacy_admin";

-- mace.mace_memories: seeded epoch function mace.mace_seeded_epoch
CREATE OR REPLACE FUNCTION "mace"."mace_seeded_epoch"(seed text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN timestamptz '2000-01-01 00:00:00+00' + make_interval(secs => (
  ((get_byte(sha256(convert_to(seed, 'UTF8')), 0)::bigint << 24)
   | (get_byte(sha256(convert_to(seed, 'UTF8')), 1)::bigint << 16)
   | (get_byte(sha256(convert_to(seed, 'UTF8')), 2)::bigint << 8)
   | get_byte(sha256(convert_to(seed, 'UTF8')), 3)::bigint) % 315360000)::float8);

-- mace.mace_memories: seeded epoch function mace.mace_seeded_epoch: callable by the roles that write the journal
GRANT EXECUTE ON FUNCTION "mace"."mace_seeded_epoch"(text) TO "primitives_app", "primitives_maintainer", "primitives_privacy_admin";

-- mace.mace_memories: seeded clock function mace.mace_seeded_clock
CREATE OR REPLACE FUNCTION "mace"."mace_seeded_clock"() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    seed      text := nullif(pg_catalog.current_setting('primitives.job_seed', true), '');
    last_seq  bigint;
    last_at   timestamptz;
    last_kind text;
    at        timestamptz;
    new_row   jsonb;
    old_row   jsonb;
    stamps    jsonb := '{}';
    col       text;
BEGIN
    IF seed IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT e.seq, e.occurred_at, e.kind INTO last_seq, last_at, last_kind
    FROM "mace"."mace_memory_events" AS e WHERE e."user_id" = NEW."user_id" ORDER BY e.seq DESC LIMIT 1;
    at := CASE WHEN last_seq IS NULL THEN "mace"."mace_seeded_epoch"(seed) WHEN last_kind = 'ticked' THEN date_trunc('second', last_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 second' ELSE last_at + interval '1 microsecond' END;
    new_row := to_jsonb(NEW);
    IF TG_OP = 'UPDATE' THEN
        old_row := to_jsonb(OLD);
    END IF;
    -- each argument names a timestamp column: set now (not NULL) by this insert or changed
    -- by this update, it takes the clock's time; '?column': only when the write left it NULL
    FOR i IN 0 .. TG_NARGS - 1 LOOP
        col := TG_ARGV[i];
        IF left(col, 1) = '?' THEN
            col := substr(col, 2);
            IF new_row ->> col IS NULL THEN
                stamps := stamps || jsonb_build_object(col, at);
            END IF;
        ELSIF new_row ->> col IS NOT NULL
              AND (TG_OP = 'INSERT' OR new_row -> col IS DISTINCT FROM old_row -> col) THEN
            stamps := stamps || jsonb_build_object(col, at);
        END IF;
    END LOOP;
    IF stamps <> '{}' THEN
        NEW := jsonb_populate_record(NEW, stamps);
    END IF;
    RETURN NEW;
END
$fn$;

-- mace.mace_memories: drop trigger primitives_capacity_guard (no tier declares a capacity that refuses)
DROP TRIGGER IF EXISTS "primitives_capacity_guard" ON "mace"."mace_memories";

-- mace.mace_memories: trigger primitives_guard_delete
CREATE OR REPLACE TRIGGER "primitives_guard_delete" BEFORE DELETE ON "mace"."mace_memories" FOR EACH ROW EXECUTE FUNCTION "primitives"."guard_memory_delete"('"mace"."mace_action_links"', 'user_id');

-- mace.mace_memories: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "created_at", "updated_at", "valid_from", "superseded_at", "invalidated_at", "archived_at", "tombstoned_at", "corroborated_at", "erased_at" ON "mace"."mace_memories" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('created_at', 'updated_at', 'valid_from', 'superseded_at', 'invalidated_at', 'archived_at', 'tombstoned_at', 'corroborated_at', 'erased_at', '?event_time');

-- mace.mace_memories: comment
COMMENT ON TABLE "mace"."mace_memories" IS 'Memory rows of agent ''mace'' (tiers wm, cwm, long_term; persistent tier ''long_term''), tenant column user_id. Rows leave retrieval by state change (superseded_at, invalidated_at, archived_at, tombstoned_at), never by DELETE of persistent or action-linked rows; every change is journalled in mace.mace_memory_events.';

-- mace.mace_memories: enable row level security
ALTER TABLE "mace"."mace_memories" ENABLE ROW LEVEL SECURITY;

-- mace.mace_memories: force row level security
ALTER TABLE "mace"."mace_memories" FORCE ROW LEVEL SECURITY;

-- mace.mace_memories: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_memories";

-- mace.mace_memories: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_memories" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_memories: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_memories";

-- mace.mace_memories: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_memories" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_memories: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_memories";

-- mace.mace_memories: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_memories" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_memories: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_memories";

-- mace.mace_memories: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_memories" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_memories: reset grants
REVOKE ALL ON TABLE "mace"."mace_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_memories: grants for the app role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks") ON TABLE "mace"."mace_memories" TO "primitives_app";

-- mace.mace_memories: grants for the auditor role
GRANT SELECT ("user_id", "id", "tier", "typology", "persistent", "scope_id", "namespace", "key", "content", "tags", "provenance", "tsv", "confidence", "decay_rate", "access_count", "last_accessed_at", "event_time", "created_at", "updated_at", "valid_from", "corroborated_at", "invalidated_at", "superseded_at", "superseded_by", "archived_at", "tombstoned_at", "erased_at", "erasure_reason", "expires_at", "ttl_ticks", "source", "actor", "age_ticks", "reference_ticks") ON TABLE "mace"."mace_memories" TO "primitives_auditor";

-- mace.mace_memories: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks"), DELETE ON TABLE "mace"."mace_memories" TO "primitives_maintainer";

-- mace.mace_memory_events: table
CREATE TABLE IF NOT EXISTS "mace"."mace_memory_events" (
    "user_id" text NOT NULL,
    "seq" bigint NOT NULL,
    "event_id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "prev_hash" text NOT NULL,
    "hash" text NOT NULL,
    "kind" text NOT NULL,
    "memory_id" uuid,
    "actor" text,
    "payload" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "occurred_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "mace_memory_events_pkey" PRIMARY KEY ("user_id", "seq")
);

-- mace.mace_memory_events: index mace_memory_events_event_id_key
CREATE UNIQUE INDEX IF NOT EXISTS "mace_memory_events_event_id_key" ON "mace"."mace_memory_events" USING btree ("user_id", "event_id");

-- mace.mace_memory_events: index mace_memory_events_memory_idx
CREATE INDEX IF NOT EXISTS "mace_memory_events_memory_idx" ON "mace"."mace_memory_events" USING btree ("user_id", "memory_id", "seq") WHERE memory_id IS NOT NULL;

-- mace.mace_memory_events: drop index mace_memory_events_kind_idx (replaced by mace_memory_events_kind_rare_idx)
DROP INDEX IF EXISTS "mace"."mace_memory_events_kind_idx";

-- mace.mace_memory_events: index mace_memory_events_kind_rare_idx
CREATE INDEX IF NOT EXISTS "mace_memory_events_kind_rare_idx" ON "mace"."mace_memory_events" USING btree ("user_id", "kind", "seq") WHERE kind <> 'observed';

-- mace.mace_memory_events: chain function mace.mace_chain_event
CREATE OR REPLACE FUNCTION "mace"."mace_chain_event"() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    last_seq  bigint;
    last_hash text;
    last_at   timestamptz;
    last_kind text;
    seed      text := nullif(pg_catalog.current_setting('primitives.job_seed', true), '');
BEGIN
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
    IF NEW."user_id" IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'not_null_violation',
            MESSAGE = format('%I.%I: the tenant column %I must be set on every journal event',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME, 'user_id');
    END IF;

    -- One writer per (journal, tenant) at a time, until commit or rollback.
    -- (through primitives.tenant_xact_lock: runtime roles may not take advisory locks)
    PERFORM primitives.tenant_xact_lock(NEW."user_id", 'journal ' || TG_RELID::text);

    SELECT e.seq, e.hash, e.occurred_at, e.kind INTO last_seq, last_hash, last_at, last_kind
    FROM "mace"."mace_memory_events" AS e
    WHERE e."user_id" = NEW."user_id"
    ORDER BY e.seq DESC
    LIMIT 1;

    NEW.seq         := coalesce(last_seq, 0) + 1;
    NEW.prev_hash   := coalesce(last_hash, repeat('0', 64));
    IF seed IS NULL THEN
        NEW.occurred_at := coalesce(NEW.occurred_at, now());
    ELSE
        NEW.occurred_at := CASE WHEN last_seq IS NULL THEN "mace"."mace_seeded_epoch"(seed) WHEN last_kind = 'ticked' THEN date_trunc('second', last_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 second' ELSE last_at + interval '1 microsecond' END;
    END IF;
    IF seed IS NOT NULL AND (NEW.event_id IS NULL
                             OR substr(NEW.event_id::text, 15, 1) <> '8') THEN
        NEW.event_id := "mace"."mace_seeded_uuid"(seed || ':event:' || NEW.seq::text);
    END IF;
    NEW.payload     := coalesce(NEW.payload, '{}'::jsonb);
    NEW.hash        := primitives.event_hash(NEW.prev_hash, NEW.seq, NEW.kind, NEW.memory_id,
                                             NEW.actor, NEW.payload, NEW.occurred_at);
    RETURN NEW;
END
$fn$;

-- mace.mace_memory_events: chain function mace.mace_chain_event: not callable by PUBLIC
REVOKE ALL ON FUNCTION "mace"."mace_chain_event"() FROM PUBLIC;

-- mace.mace_memory_events: function mace.mace_erase_row: the earlier signature dropped
DROP FUNCTION IF EXISTS "mace"."mace_erase_row"(uuid, text, text);

-- mace.mace_memory_events: function mace.mace_erase_row (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "mace"."mace_erase_row"(uuid, text, uuid, text, jsonb) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH erased AS (UPDATE "mace"."mace_memories" AS m SET content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), value = '{}'::jsonb, envelope = '{}'::jsonb, tags = '{}'::text[], provenance = '{}'::jsonb, source = NULL, erased_at = now(), erasure_reason = $2, updated_at = now() WHERE m."user_id" = primitives.current_tenant() AND m.id = $1 AND m.erased_at IS NULL RETURNING m.id)
INSERT INTO "mace"."mace_memory_events" ("user_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true
$fn$;

-- mace.mace_memory_events: function mace.mace_erase_row: not callable by PUBLIC
REVOKE ALL ON FUNCTION "mace"."mace_erase_row"(uuid, text, uuid, text, jsonb) FROM PUBLIC;

-- mace.mace_memory_events: function mace.mace_erase_row: callable by the app role
GRANT EXECUTE ON FUNCTION "mace"."mace_erase_row"(uuid, text, uuid, text, jsonb) TO "primitives_app";

-- mace.mace_memory_events: trigger primitives_chain_event
CREATE OR REPLACE TRIGGER "primitives_chain_event" BEFORE INSERT ON "mace"."mace_memory_events" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_chain_event"();

-- mace.mace_memory_events: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "mace"."mace_memory_events" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- mace.mace_memory_events: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "mace"."mace_memory_events" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- mace.mace_memory_events: comment
COMMENT ON TABLE "mace"."mace_memory_events" IS 'Audit journal of agent ''mace'': one event per memory change, written in the same transaction. Hash-chained per user_id (seq, prev_hash, hash set by mace.mace_chain_event); UPDATE, DELETE and TRUNCATE are refused.';

-- mace.mace_memory_events: enable row level security
ALTER TABLE "mace"."mace_memory_events" ENABLE ROW LEVEL SECURITY;

-- mace.mace_memory_events: force row level security
ALTER TABLE "mace"."mace_memory_events" FORCE ROW LEVEL SECURITY;

-- mace.mace_memory_events: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_memory_events";

-- mace.mace_memory_events: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_memory_events" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_memory_events: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_memory_events";

-- mace.mace_memory_events: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_memory_events" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_memory_events: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_memory_events";

-- mace.mace_memory_events: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_memory_events" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_memory_events: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_memory_events";

-- mace.mace_memory_events: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_memory_events" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_memory_events: reset grants
REVOKE ALL ON TABLE "mace"."mace_memory_events" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_memory_events: grants for the app role
GRANT SELECT, INSERT ON TABLE "mace"."mace_memory_events" TO "primitives_app";

-- mace.mace_memory_events: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_memory_events" TO "primitives_auditor";

-- mace.mace_memory_events: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "mace"."mace_memory_events" TO "primitives_maintainer";

-- mace.mace_action_links: table
CREATE TABLE IF NOT EXISTS "mace"."mace_action_links" (
    "user_id" text NOT NULL,
    "action_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "kind" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "mace_action_links_pkey" PRIMARY KEY ("user_id", "action_id", "memory_id"),
    CONSTRAINT "mace_action_links_memory_fkey" FOREIGN KEY ("user_id", "memory_id") REFERENCES "mace"."mace_memories" ("user_id", "id")
);

-- mace.mace_action_links: index mace_action_links_memory_idx
CREATE INDEX IF NOT EXISTS "mace_action_links_memory_idx" ON "mace"."mace_action_links" USING btree ("user_id", "memory_id");

-- mace.mace_action_links: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "mace"."mace_action_links" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- mace.mace_action_links: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "mace"."mace_action_links" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- mace.mace_action_links: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "created_at" ON "mace"."mace_action_links" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('created_at');

-- mace.mace_action_links: comment
COMMENT ON TABLE "mace"."mace_action_links" IS 'Memory basis of each action of agent ''mace''. Append-only; a linked memory row can never be hard-deleted (primitives.guard_memory_delete).';

-- mace.mace_action_links: enable row level security
ALTER TABLE "mace"."mace_action_links" ENABLE ROW LEVEL SECURITY;

-- mace.mace_action_links: force row level security
ALTER TABLE "mace"."mace_action_links" FORCE ROW LEVEL SECURITY;

-- mace.mace_action_links: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_action_links";

-- mace.mace_action_links: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_action_links" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_action_links: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_action_links";

-- mace.mace_action_links: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_action_links" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_action_links: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_action_links";

-- mace.mace_action_links: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_action_links" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_action_links: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_action_links";

-- mace.mace_action_links: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_action_links" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_action_links: reset grants
REVOKE ALL ON TABLE "mace"."mace_action_links" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_action_links: grants for the app role
GRANT SELECT, INSERT ON TABLE "mace"."mace_action_links" TO "primitives_app";

-- mace.mace_action_links: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_action_links" TO "primitives_auditor";

-- mace.mace_action_links: grants for the maintainer role
GRANT SELECT ON TABLE "mace"."mace_action_links" TO "primitives_maintainer";

-- mace.mace_scopes: table
CREATE TABLE IF NOT EXISTS "mace"."mace_scopes" (
    "user_id" text NOT NULL,
    "tier" text NOT NULL,
    "scope_id" text NOT NULL,
    "opened_at" timestamptz NOT NULL DEFAULT now(),
    "last_activity_at" timestamptz NOT NULL DEFAULT now(),
    "closed_at" timestamptz,
    CONSTRAINT "mace_scopes_pkey" PRIMARY KEY ("user_id", "tier", "scope_id")
);

-- mace.mace_scopes: checks (replaced, so they follow the spec)
ALTER TABLE "mace"."mace_scopes"
    DROP CONSTRAINT IF EXISTS "mace_scopes_tier_check",
    ADD CONSTRAINT "mace_scopes_tier_check" CHECK (tier IN ('wm', 'cwm', 'long_term')) NOT VALID;

-- mace.mace_scopes: index mace_scopes_open_idx
CREATE INDEX IF NOT EXISTS "mace_scopes_open_idx" ON "mace"."mace_scopes" USING btree ("user_id", "tier", "last_activity_at") WHERE closed_at IS NULL;

-- mace.mace_scopes: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "opened_at", "last_activity_at", "closed_at" ON "mace"."mace_scopes" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('opened_at', 'last_activity_at', 'closed_at');

-- mace.mace_scopes: comment
COMMENT ON TABLE "mace"."mace_scopes" IS 'Scope instances (runs, sessions, jobs) of agent ''mace'' by tier.';

-- mace.mace_scopes: enable row level security
ALTER TABLE "mace"."mace_scopes" ENABLE ROW LEVEL SECURITY;

-- mace.mace_scopes: force row level security
ALTER TABLE "mace"."mace_scopes" FORCE ROW LEVEL SECURITY;

-- mace.mace_scopes: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_scopes";

-- mace.mace_scopes: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_scopes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_scopes: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_scopes";

-- mace.mace_scopes: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_scopes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_scopes: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_scopes";

-- mace.mace_scopes: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_scopes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_scopes: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_scopes";

-- mace.mace_scopes: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_scopes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_scopes: reset grants
REVOKE ALL ON TABLE "mace"."mace_scopes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_scopes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "mace"."mace_scopes" TO "primitives_app";

-- mace.mace_scopes: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_scopes" TO "primitives_auditor";

-- mace.mace_scopes: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "mace"."mace_scopes" TO "primitives_maintainer";

-- mace.mace_promotions: table
CREATE TABLE IF NOT EXISTS "mace"."mace_promotions" (
    "user_id" text NOT NULL,
    "rule" text NOT NULL,
    "source_id" uuid NOT NULL,
    "target_id" uuid,
    "promoted_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "mace_promotions_pkey" PRIMARY KEY ("user_id", "rule", "source_id")
);

-- mace.mace_promotions: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "promoted_at" ON "mace"."mace_promotions" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('promoted_at');

-- mace.mace_promotions: comment
COMMENT ON TABLE "mace"."mace_promotions" IS 'Promotion ledger of agent ''mace'': a (rule, source) pair is promoted at most once, so re-running a boundary is harmless.';

-- mace.mace_promotions: enable row level security
ALTER TABLE "mace"."mace_promotions" ENABLE ROW LEVEL SECURITY;

-- mace.mace_promotions: force row level security
ALTER TABLE "mace"."mace_promotions" FORCE ROW LEVEL SECURITY;

-- mace.mace_promotions: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_promotions";

-- mace.mace_promotions: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_promotions" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_promotions: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_promotions";

-- mace.mace_promotions: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_promotions" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_promotions: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_promotions";

-- mace.mace_promotions: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_promotions" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_promotions: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_promotions";

-- mace.mace_promotions: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_promotions" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_promotions: reset grants
REVOKE ALL ON TABLE "mace"."mace_promotions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_promotions: grants for the app role
GRANT SELECT, INSERT ON TABLE "mace"."mace_promotions" TO "primitives_app";

-- mace.mace_promotions: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_promotions" TO "primitives_auditor";

-- mace.mace_promotions: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "mace"."mace_promotions" TO "primitives_maintainer";

-- mace.mace_action_requests: table
CREATE TABLE IF NOT EXISTS "mace"."mace_action_requests" (
    "user_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "kind" text NOT NULL,
    "memory_id" uuid,
    "target_key" text,
    "payload" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "justification" text,
    "status" text NOT NULL DEFAULT 'pending',
    "created_at" timestamptz NOT NULL DEFAULT now(),
    "decided_at" timestamptz,
    CONSTRAINT "mace_action_requests_pkey" PRIMARY KEY ("user_id", "id")
);

-- mace.mace_action_requests: checks (replaced, so they follow the spec)
ALTER TABLE "mace"."mace_action_requests"
    DROP CONSTRAINT IF EXISTS "mace_action_requests_status_check",
    DROP CONSTRAINT IF EXISTS "mace_action_requests_payload_check",
    ADD CONSTRAINT "mace_action_requests_status_check" CHECK (status IN ('pending', 'approved', 'rejected', 'executed')) NOT VALID,
    ADD CONSTRAINT "mace_action_requests_payload_check" CHECK (octet_length(payload::text) <= 32768) NOT VALID;

-- mace.mace_action_requests: index mace_action_requests_status_idx
CREATE INDEX IF NOT EXISTS "mace_action_requests_status_idx" ON "mace"."mace_action_requests" USING btree ("user_id", "status", "created_at");

-- mace.mace_action_requests: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "created_at", "decided_at" ON "mace"."mace_action_requests" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('created_at', 'decided_at');

-- mace.mace_action_requests: comment
COMMENT ON TABLE "mace"."mace_action_requests" IS 'Governed write requests of agent ''mace'': a write in mode ''governed'' runs only once its request is approved.';

-- mace.mace_action_requests: enable row level security
ALTER TABLE "mace"."mace_action_requests" ENABLE ROW LEVEL SECURITY;

-- mace.mace_action_requests: force row level security
ALTER TABLE "mace"."mace_action_requests" FORCE ROW LEVEL SECURITY;

-- mace.mace_action_requests: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_action_requests";

-- mace.mace_action_requests: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_action_requests" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_action_requests: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_action_requests";

-- mace.mace_action_requests: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_action_requests" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_action_requests: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_action_requests";

-- mace.mace_action_requests: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_action_requests" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_action_requests: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_action_requests";

-- mace.mace_action_requests: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_action_requests" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_action_requests: reset grants
REVOKE ALL ON TABLE "mace"."mace_action_requests" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_action_requests: grants for the app role
GRANT SELECT, INSERT, UPDATE ("status", "decided_at") ON TABLE "mace"."mace_action_requests" TO "primitives_app";

-- mace.mace_action_requests: grants for the auditor role
GRANT SELECT ("user_id", "id", "kind", "memory_id", "target_key", "justification", "status", "created_at", "decided_at") ON TABLE "mace"."mace_action_requests" TO "primitives_auditor";

-- mace.mace_approvals: table
CREATE TABLE IF NOT EXISTS "mace"."mace_approvals" (
    "user_id" text NOT NULL,
    "request_id" uuid NOT NULL,
    "approver" text NOT NULL,
    "decision" text NOT NULL,
    "at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "mace_approvals_pkey" PRIMARY KEY ("user_id", "request_id", "approver"),
    CONSTRAINT "mace_approvals_request_fkey" FOREIGN KEY ("user_id", "request_id") REFERENCES "mace"."mace_action_requests" ("user_id", "id")
);

-- mace.mace_approvals: checks (replaced, so they follow the spec)
ALTER TABLE "mace"."mace_approvals"
    DROP CONSTRAINT IF EXISTS "mace_approvals_decision_check",
    ADD CONSTRAINT "mace_approvals_decision_check" CHECK (decision IN ('approve', 'reject')) NOT VALID;

-- mace.mace_approvals: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "mace"."mace_approvals" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- mace.mace_approvals: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "mace"."mace_approvals" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- mace.mace_approvals: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "at" ON "mace"."mace_approvals" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('at');

-- mace.mace_approvals: comment
COMMENT ON TABLE "mace"."mace_approvals" IS 'Approval decisions on governed requests of agent ''mace''. Append-only.';

-- mace.mace_approvals: enable row level security
ALTER TABLE "mace"."mace_approvals" ENABLE ROW LEVEL SECURITY;

-- mace.mace_approvals: force row level security
ALTER TABLE "mace"."mace_approvals" FORCE ROW LEVEL SECURITY;

-- mace.mace_approvals: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_approvals";

-- mace.mace_approvals: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_approvals" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_approvals: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_approvals";

-- mace.mace_approvals: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_approvals" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_approvals: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_approvals";

-- mace.mace_approvals: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_approvals" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_approvals: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_approvals";

-- mace.mace_approvals: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_approvals" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_approvals: reset grants
REVOKE ALL ON TABLE "mace"."mace_approvals" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_approvals: grants for the app role
GRANT SELECT, INSERT ON TABLE "mace"."mace_approvals" TO "primitives_app";

-- mace.mace_approvals: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_approvals" TO "primitives_auditor";

-- mace.mace_pii_raw: table
CREATE TABLE IF NOT EXISTS "mace"."mace_pii_raw" (
    "user_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "content" text NOT NULL,
    "value" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "envelope" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "consent_event" uuid NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "mace_pii_raw_pkey" PRIMARY KEY ("user_id", "memory_id"),
    CONSTRAINT "mace_pii_raw_memory_fkey" FOREIGN KEY ("user_id", "memory_id") REFERENCES "mace"."mace_memories" ("user_id", "id") ON DELETE CASCADE
);

-- mace.mace_pii_raw: function mace.mace_erase_row (SECURITY DEFINER) (again: erasure also deletes the raw copy)
CREATE OR REPLACE FUNCTION "mace"."mace_erase_row"(uuid, text, uuid, text, jsonb) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH gone AS (DELETE FROM "mace"."mace_pii_raw" AS p WHERE p."user_id" = primitives.current_tenant() AND p.memory_id = $1), erased AS (UPDATE "mace"."mace_memories" AS m SET content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), value = '{}'::jsonb, envelope = '{}'::jsonb, tags = '{}'::text[], provenance = '{}'::jsonb, source = NULL, erased_at = now(), erasure_reason = $2, updated_at = now() WHERE m."user_id" = primitives.current_tenant() AND m.id = $1 AND m.erased_at IS NULL RETURNING m.id)
INSERT INTO "mace"."mace_memory_events" ("user_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true
$fn$;

-- mace.mace_pii_raw: function mace.mace_erase_row: not callable by PUBLIC (again: erasure also deletes the raw copy)
REVOKE ALL ON FUNCTION "mace"."mace_erase_row"(uuid, text, uuid, text, jsonb) FROM PUBLIC;

-- mace.mace_pii_raw: function mace.mace_erase_row: callable by the app role (again: erasure also deletes the raw copy)
GRANT EXECUTE ON FUNCTION "mace"."mace_erase_row"(uuid, text, uuid, text, jsonb) TO "primitives_app";

-- mace.mace_pii_raw: function mace.mace_read_pii_raw (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "mace"."mace_read_pii_raw"(uuid, uuid, text, jsonb) RETURNS TABLE (content text, value jsonb, envelope jsonb, consent_event uuid)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH r AS (SELECT p.content, p.value, p.envelope, p.consent_event FROM "mace"."mace_pii_raw" AS p WHERE p."user_id" = primitives.current_tenant() AND p.memory_id = $1),
e AS (INSERT INTO "mace"."mace_memory_events" ("user_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $2, 'pii_raw_read', (SELECT m.id FROM "mace"."mace_memories" AS m WHERE m."user_id" = primitives.current_tenant() AND m.id = $1), $3, $4 || jsonb_build_object('found', EXISTS (SELECT 1 FROM r), 'memory', $1::text))
SELECT r.content, r.value, r.envelope, r.consent_event FROM r UNION ALL SELECT NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM r)
$fn$;

-- mace.mace_pii_raw: function mace.mace_read_pii_raw: not callable by PUBLIC
REVOKE ALL ON FUNCTION "mace"."mace_read_pii_raw"(uuid, uuid, text, jsonb) FROM PUBLIC;

-- mace.mace_pii_raw: function mace.mace_read_pii_raw: callable by primitives_privacy_admin
GRANT EXECUTE ON FUNCTION "mace"."mace_read_pii_raw"(uuid, uuid, text, jsonb) TO "primitives_privacy_admin";

-- mace.mace_pii_raw: trigger primitives_seeded_clock
CREATE OR REPLACE TRIGGER "primitives_seeded_clock" BEFORE INSERT OR UPDATE OF "created_at" ON "mace"."mace_pii_raw" FOR EACH ROW EXECUTE FUNCTION "mace"."mace_seeded_clock"('created_at');

-- mace.mace_pii_raw: comment
COMMENT ON TABLE "mace"."mace_pii_raw" IS 'Raw personal data of agent ''mace'' kept with logged consent; read only through the privacy admin''s journalled function.';

-- mace.mace_pii_raw: enable row level security
ALTER TABLE "mace"."mace_pii_raw" ENABLE ROW LEVEL SECURITY;

-- mace.mace_pii_raw: force row level security
ALTER TABLE "mace"."mace_pii_raw" FORCE ROW LEVEL SECURITY;

-- mace.mace_pii_raw: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "mace"."mace_pii_raw";

-- mace.mace_pii_raw: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "mace"."mace_pii_raw" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_pii_raw: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "mace"."mace_pii_raw";

-- mace.mace_pii_raw: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "mace"."mace_pii_raw" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- mace.mace_pii_raw: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "mace"."mace_pii_raw";

-- mace.mace_pii_raw: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "mace"."mace_pii_raw" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- mace.mace_pii_raw: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "mace"."mace_pii_raw";

-- mace.mace_pii_raw: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "mace"."mace_pii_raw" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- mace.mace_pii_raw: reset grants
REVOKE ALL ON TABLE "mace"."mace_pii_raw" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_pii_raw: grants for the app role
GRANT INSERT ON TABLE "mace"."mace_pii_raw" TO "primitives_app";

-- langgraph.mace_checkpoints: table
CREATE TABLE IF NOT EXISTS "langgraph"."mace_checkpoints" (
    "user_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "parent_checkpoint_id" text,
    "type" text,
    "checkpoint" jsonb NOT NULL,
    "metadata" jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT "mace_checkpoints_pkey" PRIMARY KEY ("user_id", "thread_id", "checkpoint_ns", "checkpoint_id")
);

-- langgraph.mace_checkpoints: comment
COMMENT ON TABLE "langgraph"."mace_checkpoints" IS 'LangGraph checkpoints (thread state) of agent ''mace'', isolated by user_id (row-level security).';

-- langgraph.mace_checkpoints: enable row level security
ALTER TABLE "langgraph"."mace_checkpoints" ENABLE ROW LEVEL SECURITY;

-- langgraph.mace_checkpoints: force row level security
ALTER TABLE "langgraph"."mace_checkpoints" FORCE ROW LEVEL SECURITY;

-- langgraph.mace_checkpoints: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "langgraph"."mace_checkpoints";

-- langgraph.mace_checkpoints: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "langgraph"."mace_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.mace_checkpoints: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "langgraph"."mace_checkpoints";

-- langgraph.mace_checkpoints: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "langgraph"."mace_checkpoints" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.mace_checkpoints: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "langgraph"."mace_checkpoints";

-- langgraph.mace_checkpoints: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "langgraph"."mace_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.mace_checkpoints: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "langgraph"."mace_checkpoints";

-- langgraph.mace_checkpoints: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "langgraph"."mace_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.mace_checkpoints: reset grants
REVOKE ALL ON TABLE "langgraph"."mace_checkpoints" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.mace_checkpoints: grants for the app role
GRANT SELECT, INSERT, UPDATE ("checkpoint", "metadata") ON TABLE "langgraph"."mace_checkpoints" TO "primitives_app";

-- langgraph.mace_checkpoints: grants for the auditor role
GRANT SELECT ("user_id", "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type") ON TABLE "langgraph"."mace_checkpoints" TO "primitives_auditor";

-- langgraph.mace_checkpoint_blobs: table
CREATE TABLE IF NOT EXISTS "langgraph"."mace_checkpoint_blobs" (
    "user_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "channel" text NOT NULL,
    "version" text NOT NULL,
    "type" text NOT NULL,
    "blob" bytea,
    CONSTRAINT "mace_checkpoint_blobs_pkey" PRIMARY KEY ("user_id", "thread_id", "checkpoint_ns", "channel", "version")
);

-- langgraph.mace_checkpoint_blobs: comment
COMMENT ON TABLE "langgraph"."mace_checkpoint_blobs" IS 'LangGraph channel values by version, serialized by the saver, of agent ''mace'', isolated by user_id (row-level security).';

-- langgraph.mace_checkpoint_blobs: enable row level security
ALTER TABLE "langgraph"."mace_checkpoint_blobs" ENABLE ROW LEVEL SECURITY;

-- langgraph.mace_checkpoint_blobs: force row level security
ALTER TABLE "langgraph"."mace_checkpoint_blobs" FORCE ROW LEVEL SECURITY;

-- langgraph.mace_checkpoint_blobs: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "langgraph"."mace_checkpoint_blobs";

-- langgraph.mace_checkpoint_blobs: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "langgraph"."mace_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.mace_checkpoint_blobs: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "langgraph"."mace_checkpoint_blobs";

-- langgraph.mace_checkpoint_blobs: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "langgraph"."mace_checkpoint_blobs" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.mace_checkpoint_blobs: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "langgraph"."mace_checkpoint_blobs";

-- langgraph.mace_checkpoint_blobs: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "langgraph"."mace_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.mace_checkpoint_blobs: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "langgraph"."mace_checkpoint_blobs";

-- langgraph.mace_checkpoint_blobs: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "langgraph"."mace_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.mace_checkpoint_blobs: reset grants
REVOKE ALL ON TABLE "langgraph"."mace_checkpoint_blobs" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.mace_checkpoint_blobs: grants for the app role
GRANT SELECT, INSERT ON TABLE "langgraph"."mace_checkpoint_blobs" TO "primitives_app";

-- langgraph.mace_checkpoint_blobs: grants for the auditor role
GRANT SELECT ("user_id", "thread_id", "checkpoint_ns", "channel", "version", "type") ON TABLE "langgraph"."mace_checkpoint_blobs" TO "primitives_auditor";

-- langgraph.mace_checkpoint_writes: table
CREATE TABLE IF NOT EXISTS "langgraph"."mace_checkpoint_writes" (
    "user_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "task_id" text NOT NULL,
    "task_path" text NOT NULL DEFAULT '',
    "idx" integer NOT NULL,
    "channel" text NOT NULL,
    "type" text,
    "blob" bytea NOT NULL,
    CONSTRAINT "mace_checkpoint_writes_pkey" PRIMARY KEY ("user_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
);

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_threads (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."mace_checkpoints_delete_threads"(text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."mace_checkpoint_writes" WHERE "user_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."mace_checkpoint_blobs" WHERE "user_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."mace_checkpoints" WHERE "user_id" = primitives.current_tenant() AND thread_id = ANY ($1)
$fn$;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_threads: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."mace_checkpoints_delete_threads"(text[]) FROM PUBLIC;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_threads: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."mace_checkpoints_delete_threads"(text[]) TO "primitives_app";

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_runs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."mace_checkpoints_delete_runs"(text[]) RETURNS TABLE (thread text, namespace text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH gone AS (DELETE FROM "langgraph"."mace_checkpoints" WHERE "user_id" = primitives.current_tenant() AND metadata ->> 'run_id' = ANY ($1) RETURNING thread_id, checkpoint_ns, checkpoint_id),
writes AS (DELETE FROM "langgraph"."mace_checkpoint_writes" AS w USING gone WHERE w."user_id" = primitives.current_tenant() AND w.thread_id = gone.thread_id AND w.checkpoint_ns = gone.checkpoint_ns AND w.checkpoint_id = gone.checkpoint_id)
SELECT DISTINCT gone.thread_id, gone.checkpoint_ns FROM gone
$fn$;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_runs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."mace_checkpoints_delete_runs"(text[]) FROM PUBLIC;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_runs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."mace_checkpoints_delete_runs"(text[]) TO "primitives_app";

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_blobs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."mace_checkpoints_delete_blobs"(text[], text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."mace_checkpoint_blobs" AS b USING unnest($1, $2) AS p(thread_id, checkpoint_ns) WHERE b."user_id" = primitives.current_tenant() AND b.thread_id = p.thread_id AND b.checkpoint_ns = p.checkpoint_ns AND NOT EXISTS (SELECT 1 FROM "langgraph"."mace_checkpoints" AS c WHERE c."user_id" = b."user_id" AND c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
$fn$;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_blobs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."mace_checkpoints_delete_blobs"(text[], text[]) FROM PUBLIC;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_delete_blobs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."mace_checkpoints_delete_blobs"(text[], text[]) TO "primitives_app";

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_prune (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."mace_checkpoints_prune"(text, text, text, text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."mace_checkpoint_writes" WHERE "user_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
DELETE FROM "langgraph"."mace_checkpoints" WHERE "user_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
UPDATE "langgraph"."mace_checkpoints" SET parent_checkpoint_id = NULL WHERE "user_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY ($4) AND parent_checkpoint_id <> ALL ($4)
$fn$;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_prune: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."mace_checkpoints_prune"(text, text, text, text[]) FROM PUBLIC;

-- langgraph.mace_checkpoint_writes: function langgraph.mace_checkpoints_prune: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."mace_checkpoints_prune"(text, text, text, text[]) TO "primitives_app";

-- langgraph.mace_checkpoint_writes: comment
COMMENT ON TABLE "langgraph"."mace_checkpoint_writes" IS 'LangGraph pending writes of checkpoints of agent ''mace'', isolated by user_id (row-level security).';

-- langgraph.mace_checkpoint_writes: enable row level security
ALTER TABLE "langgraph"."mace_checkpoint_writes" ENABLE ROW LEVEL SECURITY;

-- langgraph.mace_checkpoint_writes: force row level security
ALTER TABLE "langgraph"."mace_checkpoint_writes" FORCE ROW LEVEL SECURITY;

-- langgraph.mace_checkpoint_writes: replace policy mace_tenant_isolation
DROP POLICY IF EXISTS "mace_tenant_isolation" ON "langgraph"."mace_checkpoint_writes";

-- langgraph.mace_checkpoint_writes: policy mace_tenant_isolation
CREATE POLICY "mace_tenant_isolation" ON "langgraph"."mace_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.mace_checkpoint_writes: replace policy mace_auditor_read
DROP POLICY IF EXISTS "mace_auditor_read" ON "langgraph"."mace_checkpoint_writes";

-- langgraph.mace_checkpoint_writes: policy mace_auditor_read
CREATE POLICY "mace_auditor_read" ON "langgraph"."mace_checkpoint_writes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.mace_checkpoint_writes: replace policy mace_owner_tenant
DROP POLICY IF EXISTS "mace_owner_tenant" ON "langgraph"."mace_checkpoint_writes";

-- langgraph.mace_checkpoint_writes: policy mace_owner_tenant
CREATE POLICY "mace_owner_tenant" ON "langgraph"."mace_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.mace_checkpoint_writes: replace policy mace_maintainer
DROP POLICY IF EXISTS "mace_maintainer" ON "langgraph"."mace_checkpoint_writes";

-- langgraph.mace_checkpoint_writes: policy mace_maintainer
CREATE POLICY "mace_maintainer" ON "langgraph"."mace_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.mace_checkpoint_writes: reset grants
REVOKE ALL ON TABLE "langgraph"."mace_checkpoint_writes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.mace_checkpoint_writes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("channel", "type", "blob") ON TABLE "langgraph"."mace_checkpoint_writes" TO "primitives_app";

-- langgraph.mace_checkpoint_writes: grants for the auditor role
GRANT SELECT ("user_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel", "type") ON TABLE "langgraph"."mace_checkpoint_writes" TO "primitives_auditor";

-- mace.mace_memories: drop trigger primitives_publish if an earlier plan published (this spec publishes nothing)
DROP TRIGGER IF EXISTS "primitives_publish" ON "mace"."mace_memories";

-- mace.mace_active_memories: view
CREATE OR REPLACE VIEW "mace"."mace_active_memories" WITH (security_invoker = true) AS
SELECT "m"."user_id",
       "m"."id",
       "m"."tier",
       "m"."typology",
       "m"."persistent",
       "m"."scope_id",
       "m"."namespace",
       "m"."key",
       "m"."content",
       "m"."value",
       "m"."envelope",
       "m"."tags",
       "m"."provenance",
       "m"."tsv",
       "m"."confidence",
       "m"."decay_rate",
       "m"."access_count",
       "m"."last_accessed_at",
       "m"."event_time",
       "m"."created_at",
       "m"."updated_at",
       "m"."valid_from",
       "m"."corroborated_at",
       "m"."invalidated_at",
       "m"."superseded_at",
       "m"."superseded_by",
       "m"."archived_at",
       "m"."tombstoned_at",
       "m"."erased_at",
       "m"."erasure_reason",
       "m"."expires_at",
       "m"."ttl_ticks",
       "m"."source",
       "m"."actor",
       "m"."age_ticks",
       "m"."reference_ticks"
FROM "mace"."mace_memories" AS m
WHERE "m"."superseded_at" IS NULL AND "m"."invalidated_at" IS NULL AND "m"."archived_at" IS NULL AND "m"."tombstoned_at" IS NULL AND m.erased_at IS NULL
  AND (m.expires_at IS NULL OR m.expires_at > now());

-- mace.mace_active_memories: comment
COMMENT ON VIEW "mace"."mace_active_memories" IS 'Memory rows of agent ''mace'' currently in retrieval (not superseded, invalidated, archived, tombstoned, erased or expired).';

-- mace.mace_active_memories: reset grants
REVOKE ALL ON TABLE "mace"."mace_active_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_active_memories: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_active_memories" TO "primitives_app";

-- mace.mace_audit_lineage: view
CREATE OR REPLACE VIEW "mace"."mace_audit_lineage" WITH (security_invoker = true) AS
SELECT "e"."user_id",
       "e"."memory_id",
       row_number() OVER (PARTITION BY "e"."user_id", e.memory_id ORDER BY e.seq) AS "step",
       "e"."seq",
       "e"."event_id",
       "e"."kind",
       "e"."actor",
       "e"."occurred_at",
       "e"."payload",
       "e"."prev_hash",
       "e"."hash",
       "m"."tier",
       "m"."typology",
       "m"."key"
FROM "mace"."mace_memory_events" AS e
LEFT JOIN "mace"."mace_memories" AS m ON "m"."user_id" = "e"."user_id" AND "m"."id" = "e"."memory_id"
WHERE e.memory_id IS NOT NULL;

-- mace.mace_audit_lineage: comment
COMMENT ON VIEW "mace"."mace_audit_lineage" IS 'Lineage: every journal event of each memory of agent ''mace'', in order (step 1, 2, ...).';

-- mace.mace_audit_lineage: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_lineage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_lineage: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_lineage" TO "primitives_app";

-- mace.mace_audit_lineage: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_lineage" TO "primitives_auditor";

-- mace.mace_audit_supersession: view
CREATE OR REPLACE VIEW "mace"."mace_audit_supersession" WITH (security_invoker = true) AS
WITH RECURSIVE chain AS (
    SELECT "m"."user_id", m.id AS root_id, m.id AS memory_id, m.superseded_by, 0 AS depth, ARRAY[m.id] AS path
    FROM "mace"."mace_memories" AS m
    WHERE m.superseded_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM "mace"."mace_memories" AS p WHERE "p"."user_id" = "m"."user_id" AND p.superseded_by = m.id)
    UNION ALL
    SELECT "c"."user_id", c.root_id, n.id, n.superseded_by, c.depth + 1, c.path || n.id
    FROM chain AS c
    JOIN "mace"."mace_memories" AS n ON "n"."user_id" = "c"."user_id" AND "n"."id" = "c"."superseded_by"
    WHERE n.id <> ALL (c.path)
)
SELECT "c"."user_id",
       "c"."root_id",
       "c"."memory_id",
       "c"."depth",
       "c"."superseded_by",
       c.superseded_by IS NULL AS "is_latest",
       "m"."tier",
       "m"."typology",
       "m"."namespace",
       "m"."key",
       "m"."created_at",
       "m"."superseded_at"
FROM chain AS c
JOIN "mace"."mace_memories" AS m ON "m"."user_id" = "c"."user_id" AND "m"."id" = "c"."memory_id";

-- mace.mace_audit_supersession: comment
COMMENT ON VIEW "mace"."mace_audit_supersession" IS 'Supersession chains of agent ''mace'': root_id is the oldest version, depth counts versions after it, is_latest marks the newest.';

-- mace.mace_audit_supersession: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_supersession" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_supersession: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_supersession" TO "primitives_app";

-- mace.mace_audit_supersession: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_supersession" TO "primitives_auditor";

-- mace.mace_audit_action_basis: view
CREATE OR REPLACE VIEW "mace"."mace_audit_action_basis" WITH (security_invoker = true) AS
SELECT "l"."user_id",
       "l"."action_id",
       "l"."kind" AS "link_kind",
       "l"."created_at" AS "linked_at",
       "l"."memory_id",
       "m"."tier",
       "m"."typology",
       "m"."namespace",
       "m"."key",
       "m"."content",
       "m"."created_at" AS "memory_created_at",
       "m"."superseded_by",
       CASE WHEN "m"."erased_at" IS NOT NULL THEN 'ERASED' WHEN "m"."tombstoned_at" IS NOT NULL THEN 'TOMBSTONED' WHEN "m"."superseded_at" IS NOT NULL THEN 'SUPERSEDED' WHEN "m"."invalidated_at" IS NOT NULL THEN 'INVALIDATED' WHEN "m"."archived_at" IS NOT NULL THEN 'ARCHIVED' WHEN "m"."expires_at" <= now() THEN 'EXPIRED' ELSE 'ACTIVE' END AS "memory_state"
FROM "mace"."mace_action_links" AS l
JOIN "mace"."mace_memories" AS m ON "m"."user_id" = "l"."user_id" AND "m"."id" = "l"."memory_id";

-- mace.mace_audit_action_basis: comment
COMMENT ON VIEW "mace"."mace_audit_action_basis" IS 'The memory rows each action of agent ''mace'' relied on, with their state now.';

-- mace.mace_audit_action_basis: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_action_basis" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_action_basis: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_action_basis" TO "primitives_app";

-- mace.mace_audit_action_basis: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_action_basis" TO "primitives_auditor";

-- mace.mace_audit_retention_state: view
CREATE OR REPLACE VIEW "mace"."mace_audit_retention_state" WITH (security_invoker = true) AS
SELECT "m"."user_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."typology",
       "m"."namespace",
       "m"."key",
       "m"."persistent",
       "m"."created_at",
       "m"."last_accessed_at",
       "k"."link_count",
       CASE WHEN m.tombstoned_at IS NOT NULL THEN 'TOMBSTONED' WHEN k.link_count > 0 THEN 'REFERENCED' WHEN m."archived_at" IS NOT NULL OR m."superseded_at" IS NOT NULL OR m."invalidated_at" IS NOT NULL THEN 'ORPHANED' ELSE 'ACTIVE' END AS "retention_state"
FROM "mace"."mace_memories" AS m
CROSS JOIN LATERAL (SELECT count(*) AS link_count FROM "mace"."mace_action_links" AS l WHERE "m"."user_id" = "l"."user_id" AND "m"."id" = "l"."memory_id") AS k;

-- mace.mace_audit_retention_state: comment
COMMENT ON VIEW "mace"."mace_audit_retention_state" IS 'Retention state of each memory of agent ''mace'': ACTIVE, REFERENCED, ORPHANED, TOMBSTONED.';

-- mace.mace_audit_retention_state: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_retention_state" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_retention_state: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_retention_state" TO "primitives_app";

-- mace.mace_audit_retention_state: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_retention_state" TO "primitives_auditor";

-- mace.mace_audit_erasures: view
CREATE OR REPLACE VIEW "mace"."mace_audit_erasures" WITH (security_invoker = true) AS
SELECT "m"."user_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."key",
       "m"."erased_at",
       "m"."erasure_reason",
       x.seq AS "erasure_event_seq",
       coalesce(m.content !~ '^sha256:[0-9a-f]{64}$' OR m.value <> '{}'::jsonb OR m.envelope <> '{}'::jsonb OR m.provenance <> '{}'::jsonb OR m.tags <> '{}'::text[] OR m.source IS NOT NULL, false) AS "residue"
FROM "mace"."mace_memories" AS m
LEFT JOIN LATERAL (SELECT e.seq, e.payload ->> 'subject_sha256' AS subject_sha256 FROM "mace"."mace_memory_events" AS e WHERE "e"."user_id" = "m"."user_id" AND e.memory_id = m.id AND e.kind = 'erased' ORDER BY e.seq DESC LIMIT 1) AS x ON true
WHERE m.erased_at IS NOT NULL;

-- mace.mace_audit_erasures: comment
COMMENT ON VIEW "mace"."mace_audit_erasures" IS 'Erased memory of agent ''mace''; residue is true when anything beyond the content hash remains (must always be false).';

-- mace.mace_audit_erasures: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_erasures" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_erasures: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_erasures" TO "primitives_app";

-- mace.mace_audit_sanitization: view
CREATE OR REPLACE VIEW "mace"."mace_audit_sanitization" WITH (security_invoker = true) AS
SELECT "e"."user_id",
       "e"."seq",
       "e"."event_id",
       "e"."memory_id",
       "e"."actor",
       "e"."occurred_at",
       e.payload ->> 'gate' AS "gate",
       e.payload ->> 'from' AS "from_ref",
       e.payload ->> 'to' AS "to_ref",
       e.payload -> 'stripped' AS "stripped",
       "e"."payload"
FROM "mace"."mace_memory_events" AS e
WHERE e.kind = 'sanitized';

-- mace.mace_audit_sanitization: comment
COMMENT ON VIEW "mace"."mace_audit_sanitization" IS 'Memory of agent ''mace'' that crossed a sanitization gate, from the journal.';

-- mace.mace_audit_sanitization: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_sanitization" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_sanitization: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_sanitization" TO "primitives_app";

-- mace.mace_audit_sanitization: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_sanitization" TO "primitives_auditor";

-- mace.mace_audit_redactions: view
CREATE OR REPLACE VIEW "mace"."mace_audit_redactions" WITH (security_invoker = true) AS
SELECT "e"."user_id",
       "e"."seq",
       "e"."event_id",
       "e"."kind",
       "e"."memory_id",
       "e"."actor",
       "e"."occurred_at",
       e.payload ->> 'policy' AS "policy",
       e.payload ->> 'action' AS "action",
       e.payload -> 'kinds' AS "kinds",
       e.payload -> 'fields' AS "fields",
       (e.payload ->> 'consent_event')::uuid AS "consent_event",
       (e.payload ->> 'found')::boolean AS "raw_found"
FROM "mace"."mace_memory_events" AS e
WHERE e.kind IN ('pii_redacted', 'pii_consent', 'pii_raw_read');

-- mace.mace_audit_redactions: comment
COMMENT ON VIEW "mace"."mace_audit_redactions" IS 'Personal data of agent ''mace'' redacted before writes, consents recorded and raw reads by the privacy admin, from the journal (kinds and counts, never a value).';

-- mace.mace_audit_redactions: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_redactions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_redactions: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_redactions" TO "primitives_app";

-- mace.mace_audit_redactions: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_redactions" TO "primitives_auditor";

-- mace.mace_audit_policy_coverage: view
CREATE OR REPLACE VIEW "mace"."mace_audit_policy_coverage" WITH (security_invoker = true) AS
SELECT "r"."table_schema",
       "r"."table_name",
       c.oid IS NOT NULL AS "present",
       coalesce(c.relrowsecurity, false) AS "rls_enabled",
       coalesce(c.relforcerowsecurity, false) AS "rls_forced",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'mace_tenant_isolation') AS "tenant_policy",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'mace_auditor_read') AS "auditor_policy",
       pg_catalog.pg_get_userbyid(c.relowner) AS "owner"
FROM (VALUES ('mace', 'mace_memories'),
             ('mace', 'mace_memory_events'),
             ('mace', 'mace_action_links'),
             ('mace', 'mace_scopes'),
             ('mace', 'mace_promotions'),
             ('mace', 'mace_action_requests'),
             ('mace', 'mace_approvals'),
             ('mace', 'mace_pii_raw'),
             ('langgraph', 'mace_checkpoints'),
             ('langgraph', 'mace_checkpoint_blobs'),
             ('langgraph', 'mace_checkpoint_writes')) AS r (table_schema, table_name)
LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = r.table_schema
LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = r.table_name AND c.relkind IN ('r', 'p');

-- mace.mace_audit_policy_coverage: comment
COMMENT ON VIEW "mace"."mace_audit_policy_coverage" IS 'Row-level security coverage of every table of agent ''mace'' (tenant column user_id), read from the catalog.';

-- mace.mace_audit_policy_coverage: reset grants
REVOKE ALL ON TABLE "mace"."mace_audit_policy_coverage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- mace.mace_audit_policy_coverage: grants for the app role
GRANT SELECT ON TABLE "mace"."mace_audit_policy_coverage" TO "primitives_app";

-- mace.mace_audit_policy_coverage: grants for the auditor role
GRANT SELECT ON TABLE "mace"."mace_audit_policy_coverage" TO "primitives_auditor";

-- after the plan commits, each in its own transaction (readers and writers are not blocked):

-- mace.mace_memories: validate the checks against the existing rows
ALTER TABLE "mace"."mace_memories"
    VALIDATE CONSTRAINT "mace_memories_bounds_check";

-- mace.mace_scopes: validate the checks against the existing rows
ALTER TABLE "mace"."mace_scopes"
    VALIDATE CONSTRAINT "mace_scopes_tier_check";

-- mace.mace_action_requests: validate the checks against the existing rows
ALTER TABLE "mace"."mace_action_requests"
    VALIDATE CONSTRAINT "mace_action_requests_status_check",
    VALIDATE CONSTRAINT "mace_action_requests_payload_check";

-- mace.mace_approvals: validate the checks against the existing rows
ALTER TABLE "mace"."mace_approvals"
    VALIDATE CONSTRAINT "mace_approvals_decision_check";
