-- primitives plan for agent 'assistant': 298 statements
-- store memory.assistant_*, tenant column user_id; extensions: vector, trigram, btree_gin; leakproof full-text match

-- objects are owned by the owner role
SET LOCAL ROLE "primitives_owner";

-- schema memory
CREATE SCHEMA IF NOT EXISTS "memory" AUTHORIZATION "primitives_owner";

-- schema memory: usage for the runtime roles
GRANT USAGE ON SCHEMA "memory" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- schema langgraph
CREATE SCHEMA IF NOT EXISTS "langgraph" AUTHORIZATION "primitives_owner";

-- schema langgraph: usage for the runtime roles
GRANT USAGE ON SCHEMA "langgraph" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_memories: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_memories" (
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
    "tsv" tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, "content")) STORED,
    "embedding" halfvec(384),
    "embedding_model" text,
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
    CONSTRAINT "assistant_memories_pkey" PRIMARY KEY ("user_id", "id")
);

-- memory.assistant_memories: columns added since the table first shipped
ALTER TABLE "memory"."assistant_memories" ADD COLUMN IF NOT EXISTS "corroborated_at" timestamptz, ADD COLUMN IF NOT EXISTS "age_ticks" integer, ADD COLUMN IF NOT EXISTS "reference_ticks" integer[];

-- memory.assistant_memories: bounds function memory.assistant_memories_bounds (its CHECKs, planned once per session)
CREATE OR REPLACE FUNCTION "memory"."assistant_memories_bounds"("tier" text, "typology" text, "content" text, "value" jsonb, "envelope" jsonb, "provenance" jsonb, "confidence" real, "erased_at" timestamptz, "erasure_reason" text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $bounds$
BEGIN
    -- every bound at once: one expression, the common case
    IF ((tier IN ('session', 'long_term'))
        AND ((tier || ':' || typology) = ANY ('{session:episodic,long_term:episodic,long_term:semantic,long_term:procedural,long_term:opinion}'::text[]))
        AND (char_length(content) <= 4000)
        AND (octet_length("value"::text) <= 32768)
        AND (octet_length("envelope"::text) <= 8192)
        AND (octet_length("provenance"::text) <= 32768)
        AND (confidence BETWEEN 0 AND 1)
        AND (erased_at IS NULL OR erasure_reason IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- a bound is broken: fail as its own constraint would
    IF (tier IN ('session', 'long_term')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_tier_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_tier_check"';
    END IF;
    IF ((tier || ':' || typology) = ANY ('{session:episodic,long_term:episodic,long_term:semantic,long_term:procedural,long_term:opinion}'::text[])) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_typology_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_typology_check"';
    END IF;
    IF (char_length(content) <= 4000) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_content_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_content_check"';
    END IF;
    IF (octet_length("value"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_value_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_value_check"';
    END IF;
    IF (octet_length("envelope"::text) <= 8192) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_envelope_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_envelope_check"';
    END IF;
    IF (octet_length("provenance"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_provenance_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_provenance_check"';
    END IF;
    IF (confidence BETWEEN 0 AND 1) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_confidence_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_confidence_check"';
    END IF;
    IF (erased_at IS NULL OR erasure_reason IS NOT NULL) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'memory',
            TABLE = 'assistant_memories', CONSTRAINT = 'assistant_memories_erasure_check',
            MESSAGE = 'new row for relation "assistant_memories" violates check constraint "assistant_memories_erasure_check"';
    END IF;
    RETURN true;
END
$bounds$;

-- memory.assistant_memories: bounds function: not callable by PUBLIC
REVOKE ALL ON FUNCTION "memory"."assistant_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) FROM PUBLIC;

-- memory.assistant_memories: bounds function: the app role writes the table
GRANT EXECUTE ON FUNCTION "memory"."assistant_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_app";

-- memory.assistant_memories: bounds function: the maintainer role writes the table
GRANT EXECUTE ON FUNCTION "memory"."assistant_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_maintainer";

-- memory.assistant_memories: checks (replaced, so they follow the spec)
ALTER TABLE "memory"."assistant_memories"
    DROP CONSTRAINT IF EXISTS "assistant_memories_tier_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_typology_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_content_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_value_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_envelope_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_provenance_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_confidence_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_erasure_check",
    DROP CONSTRAINT IF EXISTS "assistant_memories_bounds_check",
    ADD CONSTRAINT "assistant_memories_bounds_check" CHECK ("memory"."assistant_memories_bounds"("tier", "typology", "content", "value", "envelope", "provenance", "confidence", "erased_at", "erasure_reason")) NOT VALID;

-- memory.assistant_memories: drop index assistant_memories_envelope_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "memory"."assistant_memories_envelope_idx";

-- memory.assistant_memories: drop index assistant_memories_tags_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "memory"."assistant_memories_tags_idx";

-- memory.assistant_memories: index assistant_memories_current_key
CREATE UNIQUE INDEX IF NOT EXISTS "assistant_memories_current_key" ON "memory"."assistant_memories" USING btree ("user_id", "tier", "namespace", "key") WHERE superseded_at IS NULL AND tombstoned_at IS NULL;

-- memory.assistant_memories: index assistant_memories_recent_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_recent_idx" ON "memory"."assistant_memories" USING btree ("user_id", "tier", created_at DESC) WHERE "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- memory.assistant_memories: index assistant_memories_scope_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_scope_idx" ON "memory"."assistant_memories" USING btree ("user_id", "scope_id", "tier") WHERE scope_id IS NOT NULL;

-- memory.assistant_memories: index assistant_memories_superseded_by_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_superseded_by_idx" ON "memory"."assistant_memories" USING btree ("user_id", "superseded_by") WHERE superseded_by IS NOT NULL;

-- memory.assistant_memories: index assistant_memories_expires_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_expires_idx" ON "memory"."assistant_memories" USING btree ("user_id", "expires_at") WHERE expires_at IS NOT NULL;

-- memory.assistant_memories: drop index assistant_memories_tsv_idx (replaced by assistant_memories_tsv_match_idx)
DROP INDEX IF EXISTS "memory"."assistant_memories_tsv_idx";

-- memory.assistant_memories: index assistant_memories_tsv_match_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_tsv_match_idx" ON "memory"."assistant_memories" USING gin ("user_id", tsv primitives.tsvector_match_ops);

-- memory.assistant_memories: index assistant_memories_embedding_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_embedding_idx" ON "memory"."assistant_memories" USING hnsw (embedding halfvec_cosine_ops);

-- memory.assistant_memories: index assistant_memories_embedding_pending_idx
CREATE INDEX IF NOT EXISTS "assistant_memories_embedding_pending_idx" ON "memory"."assistant_memories" USING btree ("user_id", "created_at", "id") WHERE "embedding" IS NULL AND "erased_at" IS NULL;

-- memory.assistant_memories: function memory.assistant_delete_transient (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "memory"."assistant_delete_transient"(uuid) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "memory"."assistant_memories" AS m WHERE m."user_id" = primitives.current_tenant() AND m.id = $1 RETURNING true
$fn$;

-- memory.assistant_memories: function memory.assistant_delete_transient: not callable by PUBLIC
REVOKE ALL ON FUNCTION "memory"."assistant_delete_transient"(uuid) FROM PUBLIC;

-- memory.assistant_memories: function memory.assistant_delete_transient: callable by the app role
GRANT EXECUTE ON FUNCTION "memory"."assistant_delete_transient"(uuid) TO "primitives_app";

-- memory.assistant_memories: drop trigger primitives_capacity_guard (no tier declares a capacity that refuses)
DROP TRIGGER IF EXISTS "primitives_capacity_guard" ON "memory"."assistant_memories";

-- memory.assistant_memories: trigger primitives_guard_delete
CREATE OR REPLACE TRIGGER "primitives_guard_delete" BEFORE DELETE ON "memory"."assistant_memories" FOR EACH ROW EXECUTE FUNCTION "primitives"."guard_memory_delete"('"memory"."assistant_action_links"', 'user_id');

-- memory.assistant_memories: comment
COMMENT ON TABLE "memory"."assistant_memories" IS 'Memory rows of agent ''assistant'' (tiers session, long_term; persistent tier ''long_term''), tenant column user_id. Rows leave retrieval by state change (superseded_at, invalidated_at, archived_at, tombstoned_at), never by DELETE of persistent or action-linked rows; every change is journalled in memory.assistant_memory_events.';

-- memory.assistant_memories: enable row level security
ALTER TABLE "memory"."assistant_memories" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_memories: force row level security
ALTER TABLE "memory"."assistant_memories" FORCE ROW LEVEL SECURITY;

-- memory.assistant_memories: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_memories";

-- memory.assistant_memories: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_memories" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_memories: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_memories";

-- memory.assistant_memories: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_memories" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_memories: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_memories";

-- memory.assistant_memories: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_memories" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_memories: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_memories";

-- memory.assistant_memories: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_memories" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_memories: reset grants
REVOKE ALL ON TABLE "memory"."assistant_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_memories: grants for the app role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "embedding", "embedding_model", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks") ON TABLE "memory"."assistant_memories" TO "primitives_app";

-- memory.assistant_memories: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_memories" TO "primitives_auditor";

-- memory.assistant_memories: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "embedding", "embedding_model", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks"), DELETE ON TABLE "memory"."assistant_memories" TO "primitives_maintainer";

-- memory.assistant_memory_events: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_memory_events" (
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
    CONSTRAINT "assistant_memory_events_pkey" PRIMARY KEY ("user_id", "seq")
);

-- memory.assistant_memory_events: index assistant_memory_events_event_id_key
CREATE UNIQUE INDEX IF NOT EXISTS "assistant_memory_events_event_id_key" ON "memory"."assistant_memory_events" USING btree ("user_id", "event_id");

-- memory.assistant_memory_events: index assistant_memory_events_memory_idx
CREATE INDEX IF NOT EXISTS "assistant_memory_events_memory_idx" ON "memory"."assistant_memory_events" USING btree ("user_id", "memory_id", "seq") WHERE memory_id IS NOT NULL;

-- memory.assistant_memory_events: drop index assistant_memory_events_kind_idx (replaced by assistant_memory_events_kind_rare_idx)
DROP INDEX IF EXISTS "memory"."assistant_memory_events_kind_idx";

-- memory.assistant_memory_events: index assistant_memory_events_kind_rare_idx
CREATE INDEX IF NOT EXISTS "assistant_memory_events_kind_rare_idx" ON "memory"."assistant_memory_events" USING btree ("user_id", "kind", "seq") WHERE kind <> 'observed';

-- memory.assistant_memory_events: chain function memory.assistant_chain_event
CREATE OR REPLACE FUNCTION "memory"."assistant_chain_event"() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    last_seq  bigint;
    last_hash text;
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

    SELECT e.seq, e.hash INTO last_seq, last_hash
    FROM "memory"."assistant_memory_events" AS e
    WHERE e."user_id" = NEW."user_id"
    ORDER BY e.seq DESC
    LIMIT 1;

    NEW.seq         := coalesce(last_seq, 0) + 1;
    NEW.prev_hash   := coalesce(last_hash, repeat('0', 64));
    NEW.occurred_at := coalesce(NEW.occurred_at, now());
    NEW.payload     := coalesce(NEW.payload, '{}'::jsonb);
    NEW.hash        := primitives.event_hash(NEW.prev_hash, NEW.seq, NEW.kind, NEW.memory_id,
                                             NEW.actor, NEW.payload, NEW.occurred_at);
    RETURN NEW;
END
$fn$;

-- memory.assistant_memory_events: chain function memory.assistant_chain_event: not callable by PUBLIC
REVOKE ALL ON FUNCTION "memory"."assistant_chain_event"() FROM PUBLIC;

-- memory.assistant_memory_events: function memory.assistant_erase_row: the earlier signature dropped
DROP FUNCTION IF EXISTS "memory"."assistant_erase_row"(uuid, text, text);

-- memory.assistant_memory_events: function memory.assistant_erase_row (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "memory"."assistant_erase_row"(uuid, text, uuid, text, jsonb) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH erased AS (UPDATE "memory"."assistant_memories" AS m SET content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), value = '{}'::jsonb, envelope = '{}'::jsonb, tags = '{}'::text[], provenance = '{}'::jsonb, source = NULL, embedding = NULL, erased_at = now(), erasure_reason = $2, updated_at = now() WHERE m."user_id" = primitives.current_tenant() AND m.id = $1 AND m.erased_at IS NULL RETURNING m.id)
INSERT INTO "memory"."assistant_memory_events" ("user_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true
$fn$;

-- memory.assistant_memory_events: function memory.assistant_erase_row: not callable by PUBLIC
REVOKE ALL ON FUNCTION "memory"."assistant_erase_row"(uuid, text, uuid, text, jsonb) FROM PUBLIC;

-- memory.assistant_memory_events: function memory.assistant_erase_row: callable by the app role
GRANT EXECUTE ON FUNCTION "memory"."assistant_erase_row"(uuid, text, uuid, text, jsonb) TO "primitives_app";

-- memory.assistant_memory_events: trigger primitives_chain_event
CREATE OR REPLACE TRIGGER "primitives_chain_event" BEFORE INSERT ON "memory"."assistant_memory_events" FOR EACH ROW EXECUTE FUNCTION "memory"."assistant_chain_event"();

-- memory.assistant_memory_events: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "memory"."assistant_memory_events" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- memory.assistant_memory_events: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "memory"."assistant_memory_events" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- memory.assistant_memory_events: comment
COMMENT ON TABLE "memory"."assistant_memory_events" IS 'Audit journal of agent ''assistant'': one event per memory change, written in the same transaction. Hash-chained per user_id (seq, prev_hash, hash set by memory.assistant_chain_event); UPDATE, DELETE and TRUNCATE are refused.';

-- memory.assistant_memory_events: enable row level security
ALTER TABLE "memory"."assistant_memory_events" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_memory_events: force row level security
ALTER TABLE "memory"."assistant_memory_events" FORCE ROW LEVEL SECURITY;

-- memory.assistant_memory_events: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_memory_events";

-- memory.assistant_memory_events: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_memory_events" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_memory_events: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_memory_events";

-- memory.assistant_memory_events: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_memory_events" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_memory_events: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_memory_events";

-- memory.assistant_memory_events: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_memory_events" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_memory_events: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_memory_events";

-- memory.assistant_memory_events: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_memory_events" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_memory_events: reset grants
REVOKE ALL ON TABLE "memory"."assistant_memory_events" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_memory_events: grants for the app role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_memory_events" TO "primitives_app";

-- memory.assistant_memory_events: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_memory_events" TO "primitives_auditor";

-- memory.assistant_memory_events: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_memory_events" TO "primitives_maintainer";

-- memory.assistant_action_links: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_action_links" (
    "user_id" text NOT NULL,
    "action_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "kind" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "assistant_action_links_pkey" PRIMARY KEY ("user_id", "action_id", "memory_id"),
    CONSTRAINT "assistant_action_links_memory_fkey" FOREIGN KEY ("user_id", "memory_id") REFERENCES "memory"."assistant_memories" ("user_id", "id")
);

-- memory.assistant_action_links: index assistant_action_links_memory_idx
CREATE INDEX IF NOT EXISTS "assistant_action_links_memory_idx" ON "memory"."assistant_action_links" USING btree ("user_id", "memory_id");

-- memory.assistant_action_links: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "memory"."assistant_action_links" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- memory.assistant_action_links: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "memory"."assistant_action_links" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- memory.assistant_action_links: comment
COMMENT ON TABLE "memory"."assistant_action_links" IS 'Memory basis of each action of agent ''assistant''. Append-only; a linked memory row can never be hard-deleted (primitives.guard_memory_delete).';

-- memory.assistant_action_links: enable row level security
ALTER TABLE "memory"."assistant_action_links" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_action_links: force row level security
ALTER TABLE "memory"."assistant_action_links" FORCE ROW LEVEL SECURITY;

-- memory.assistant_action_links: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_action_links";

-- memory.assistant_action_links: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_action_links" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_action_links: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_action_links";

-- memory.assistant_action_links: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_action_links" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_action_links: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_action_links";

-- memory.assistant_action_links: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_action_links" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_action_links: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_action_links";

-- memory.assistant_action_links: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_action_links" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_action_links: reset grants
REVOKE ALL ON TABLE "memory"."assistant_action_links" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_action_links: grants for the app role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_action_links" TO "primitives_app";

-- memory.assistant_action_links: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_action_links" TO "primitives_auditor";

-- memory.assistant_action_links: grants for the maintainer role
GRANT SELECT ON TABLE "memory"."assistant_action_links" TO "primitives_maintainer";

-- memory.assistant_scopes: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_scopes" (
    "user_id" text NOT NULL,
    "tier" text NOT NULL,
    "scope_id" text NOT NULL,
    "opened_at" timestamptz NOT NULL DEFAULT now(),
    "last_activity_at" timestamptz NOT NULL DEFAULT now(),
    "closed_at" timestamptz,
    CONSTRAINT "assistant_scopes_pkey" PRIMARY KEY ("user_id", "tier", "scope_id")
);

-- memory.assistant_scopes: checks (replaced, so they follow the spec)
ALTER TABLE "memory"."assistant_scopes"
    DROP CONSTRAINT IF EXISTS "assistant_scopes_tier_check",
    ADD CONSTRAINT "assistant_scopes_tier_check" CHECK (tier IN ('session', 'long_term')) NOT VALID;

-- memory.assistant_scopes: index assistant_scopes_open_idx
CREATE INDEX IF NOT EXISTS "assistant_scopes_open_idx" ON "memory"."assistant_scopes" USING btree ("user_id", "tier", "last_activity_at") WHERE closed_at IS NULL;

-- memory.assistant_scopes: comment
COMMENT ON TABLE "memory"."assistant_scopes" IS 'Scope instances (runs, sessions, jobs) of agent ''assistant'' by tier.';

-- memory.assistant_scopes: enable row level security
ALTER TABLE "memory"."assistant_scopes" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_scopes: force row level security
ALTER TABLE "memory"."assistant_scopes" FORCE ROW LEVEL SECURITY;

-- memory.assistant_scopes: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_scopes";

-- memory.assistant_scopes: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_scopes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_scopes: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_scopes";

-- memory.assistant_scopes: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_scopes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_scopes: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_scopes";

-- memory.assistant_scopes: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_scopes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_scopes: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_scopes";

-- memory.assistant_scopes: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_scopes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_scopes: reset grants
REVOKE ALL ON TABLE "memory"."assistant_scopes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_scopes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "memory"."assistant_scopes" TO "primitives_app";

-- memory.assistant_scopes: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_scopes" TO "primitives_auditor";

-- memory.assistant_scopes: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "memory"."assistant_scopes" TO "primitives_maintainer";

-- memory.assistant_promotions: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_promotions" (
    "user_id" text NOT NULL,
    "rule" text NOT NULL,
    "source_id" uuid NOT NULL,
    "target_id" uuid,
    "promoted_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "assistant_promotions_pkey" PRIMARY KEY ("user_id", "rule", "source_id")
);

-- memory.assistant_promotions: comment
COMMENT ON TABLE "memory"."assistant_promotions" IS 'Promotion ledger of agent ''assistant'': a (rule, source) pair is promoted at most once, so re-running a boundary is harmless.';

-- memory.assistant_promotions: enable row level security
ALTER TABLE "memory"."assistant_promotions" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_promotions: force row level security
ALTER TABLE "memory"."assistant_promotions" FORCE ROW LEVEL SECURITY;

-- memory.assistant_promotions: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_promotions";

-- memory.assistant_promotions: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_promotions" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_promotions: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_promotions";

-- memory.assistant_promotions: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_promotions" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_promotions: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_promotions";

-- memory.assistant_promotions: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_promotions" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_promotions: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_promotions";

-- memory.assistant_promotions: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_promotions" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_promotions: reset grants
REVOKE ALL ON TABLE "memory"."assistant_promotions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_promotions: grants for the app role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_promotions" TO "primitives_app";

-- memory.assistant_promotions: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_promotions" TO "primitives_auditor";

-- memory.assistant_promotions: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_promotions" TO "primitives_maintainer";

-- memory.assistant_entities: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_entities" (
    "user_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "canonical_name" text NOT NULL,
    "type" text NOT NULL,
    "aliases" text[] NOT NULL DEFAULT '{}'::text[],
    "summary" text,
    "mention_count" integer NOT NULL DEFAULT 0,
    "first_seen" timestamptz NOT NULL DEFAULT now(),
    "last_updated" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "assistant_entities_pkey" PRIMARY KEY ("user_id", "id")
);

-- memory.assistant_entities: checks (replaced, so they follow the spec)
ALTER TABLE "memory"."assistant_entities"
    DROP CONSTRAINT IF EXISTS "assistant_entities_name_check",
    DROP CONSTRAINT IF EXISTS "assistant_entities_summary_check",
    DROP CONSTRAINT IF EXISTS "assistant_entities_type_check",
    ADD CONSTRAINT "assistant_entities_name_check" CHECK (char_length(canonical_name) <= 512) NOT VALID,
    ADD CONSTRAINT "assistant_entities_summary_check" CHECK (char_length(summary) <= 4000) NOT VALID,
    ADD CONSTRAINT "assistant_entities_type_check" CHECK (type IN ('person', 'project', 'organization', 'place', 'concept', 'tool')) NOT VALID;

-- memory.assistant_entities: index assistant_entities_name_key
CREATE UNIQUE INDEX IF NOT EXISTS "assistant_entities_name_key" ON "memory"."assistant_entities" USING btree ("user_id", lower(canonical_name), "type");

-- memory.assistant_entities: index assistant_entities_aliases_idx
CREATE INDEX IF NOT EXISTS "assistant_entities_aliases_idx" ON "memory"."assistant_entities" USING gin ("user_id", "aliases");

-- memory.assistant_entities: comment
COMMENT ON TABLE "memory"."assistant_entities" IS 'Canonical entities mentioned in the memory of agent ''assistant''.';

-- memory.assistant_entities: enable row level security
ALTER TABLE "memory"."assistant_entities" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_entities: force row level security
ALTER TABLE "memory"."assistant_entities" FORCE ROW LEVEL SECURITY;

-- memory.assistant_entities: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_entities";

-- memory.assistant_entities: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_entities" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_entities: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_entities";

-- memory.assistant_entities: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_entities" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_entities: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_entities";

-- memory.assistant_entities: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_entities" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_entities: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_entities";

-- memory.assistant_entities: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_entities" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_entities: reset grants
REVOKE ALL ON TABLE "memory"."assistant_entities" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_entities: grants for the app role
GRANT SELECT, INSERT, UPDATE ("canonical_name", "aliases", "summary", "mention_count", "last_updated") ON TABLE "memory"."assistant_entities" TO "primitives_app";

-- memory.assistant_entities: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_entities" TO "primitives_auditor";

-- memory.assistant_entities: grants for the maintainer role
GRANT SELECT ON TABLE "memory"."assistant_entities" TO "primitives_maintainer";

-- memory.assistant_edges: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_edges" (
    "user_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "source_id" uuid NOT NULL,
    "target_id" uuid NOT NULL,
    "relation_type" text NOT NULL,
    "predicate" text,
    "weight" real NOT NULL DEFAULT 1,
    "confidence" real NOT NULL DEFAULT 1,
    "valid_from" timestamptz NOT NULL DEFAULT now(),
    "valid_until" timestamptz,
    "evidence" jsonb NOT NULL DEFAULT '[]'::jsonb,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "assistant_edges_pkey" PRIMARY KEY ("user_id", "id"),
    CONSTRAINT "assistant_edges_source_fkey" FOREIGN KEY ("user_id", "source_id") REFERENCES "memory"."assistant_memories" ("user_id", "id") ON DELETE CASCADE,
    CONSTRAINT "assistant_edges_target_fkey" FOREIGN KEY ("user_id", "target_id") REFERENCES "memory"."assistant_memories" ("user_id", "id") ON DELETE CASCADE
);

-- memory.assistant_edges: checks (replaced, so they follow the spec)
ALTER TABLE "memory"."assistant_edges"
    DROP CONSTRAINT IF EXISTS "assistant_edges_relation_type_check",
    DROP CONSTRAINT IF EXISTS "assistant_edges_confidence_check",
    DROP CONSTRAINT IF EXISTS "assistant_edges_evidence_check",
    ADD CONSTRAINT "assistant_edges_relation_type_check" CHECK (relation_type IN ('temporal', 'causal', 'entity', 'derived_from', 'supersedes')) NOT VALID,
    ADD CONSTRAINT "assistant_edges_confidence_check" CHECK (confidence BETWEEN 0 AND 1) NOT VALID,
    ADD CONSTRAINT "assistant_edges_evidence_check" CHECK (octet_length(evidence::text) <= 32768) NOT VALID;

-- memory.assistant_edges: index assistant_edges_source_idx
CREATE INDEX IF NOT EXISTS "assistant_edges_source_idx" ON "memory"."assistant_edges" USING btree ("user_id", "source_id", "relation_type");

-- memory.assistant_edges: index assistant_edges_target_idx
CREATE INDEX IF NOT EXISTS "assistant_edges_target_idx" ON "memory"."assistant_edges" USING btree ("user_id", "target_id", "relation_type");

-- memory.assistant_edges: comment
COMMENT ON TABLE "memory"."assistant_edges" IS 'Typed edges (temporal, causal, entity, derived_from, supersedes) between memory rows of agent ''assistant''; removed with their endpoints.';

-- memory.assistant_edges: enable row level security
ALTER TABLE "memory"."assistant_edges" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_edges: force row level security
ALTER TABLE "memory"."assistant_edges" FORCE ROW LEVEL SECURITY;

-- memory.assistant_edges: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_edges";

-- memory.assistant_edges: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_edges" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_edges: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_edges";

-- memory.assistant_edges: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_edges" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_edges: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_edges";

-- memory.assistant_edges: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_edges" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_edges: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_edges";

-- memory.assistant_edges: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_edges" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_edges: reset grants
REVOKE ALL ON TABLE "memory"."assistant_edges" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_edges: grants for the app role
GRANT SELECT, INSERT, UPDATE ("valid_until", "evidence") ON TABLE "memory"."assistant_edges" TO "primitives_app";

-- memory.assistant_edges: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_edges" TO "primitives_auditor";

-- memory.assistant_edges: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("valid_until", "evidence") ON TABLE "memory"."assistant_edges" TO "primitives_maintainer";

-- memory.assistant_node_entities: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_node_entities" (
    "user_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "entity_id" uuid NOT NULL,
    CONSTRAINT "assistant_node_entities_pkey" PRIMARY KEY ("user_id", "memory_id", "entity_id"),
    CONSTRAINT "assistant_node_entities_memory_fkey" FOREIGN KEY ("user_id", "memory_id") REFERENCES "memory"."assistant_memories" ("user_id", "id") ON DELETE CASCADE,
    CONSTRAINT "assistant_node_entities_entity_fkey" FOREIGN KEY ("user_id", "entity_id") REFERENCES "memory"."assistant_entities" ("user_id", "id") ON DELETE CASCADE
);

-- memory.assistant_node_entities: index assistant_node_entities_entity_idx
CREATE INDEX IF NOT EXISTS "assistant_node_entities_entity_idx" ON "memory"."assistant_node_entities" USING btree ("user_id", "entity_id");

-- memory.assistant_node_entities: comment
COMMENT ON TABLE "memory"."assistant_node_entities" IS 'Memory row -> entity mentions of agent ''assistant''.';

-- memory.assistant_node_entities: enable row level security
ALTER TABLE "memory"."assistant_node_entities" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_node_entities: force row level security
ALTER TABLE "memory"."assistant_node_entities" FORCE ROW LEVEL SECURITY;

-- memory.assistant_node_entities: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_node_entities";

-- memory.assistant_node_entities: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_node_entities" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_node_entities: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_node_entities";

-- memory.assistant_node_entities: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_node_entities" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_node_entities: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_node_entities";

-- memory.assistant_node_entities: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_node_entities" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_node_entities: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_node_entities";

-- memory.assistant_node_entities: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_node_entities" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_node_entities: reset grants
REVOKE ALL ON TABLE "memory"."assistant_node_entities" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_node_entities: grants for the app role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_node_entities" TO "primitives_app";

-- memory.assistant_node_entities: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_node_entities" TO "primitives_auditor";

-- memory.assistant_node_entities: grants for the maintainer role
GRANT SELECT ON TABLE "memory"."assistant_node_entities" TO "primitives_maintainer";

-- memory.assistant_sessions: table
CREATE TABLE IF NOT EXISTS "memory"."assistant_sessions" (
    "user_id" text NOT NULL,
    "session_id" text NOT NULL,
    "consolidated_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "assistant_sessions_pkey" PRIMARY KEY ("user_id", "session_id")
);

-- memory.assistant_sessions: comment
COMMENT ON TABLE "memory"."assistant_sessions" IS 'Consolidated sessions of agent ''assistant'' (one row per session).';

-- memory.assistant_sessions: enable row level security
ALTER TABLE "memory"."assistant_sessions" ENABLE ROW LEVEL SECURITY;

-- memory.assistant_sessions: force row level security
ALTER TABLE "memory"."assistant_sessions" FORCE ROW LEVEL SECURITY;

-- memory.assistant_sessions: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "memory"."assistant_sessions";

-- memory.assistant_sessions: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "memory"."assistant_sessions" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_sessions: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "memory"."assistant_sessions";

-- memory.assistant_sessions: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "memory"."assistant_sessions" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- memory.assistant_sessions: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "memory"."assistant_sessions";

-- memory.assistant_sessions: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "memory"."assistant_sessions" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- memory.assistant_sessions: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "memory"."assistant_sessions";

-- memory.assistant_sessions: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "memory"."assistant_sessions" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- memory.assistant_sessions: reset grants
REVOKE ALL ON TABLE "memory"."assistant_sessions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_sessions: grants for the app role
GRANT SELECT, INSERT ON TABLE "memory"."assistant_sessions" TO "primitives_app";

-- memory.assistant_sessions: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_sessions" TO "primitives_auditor";

-- langgraph.assistant_checkpoints: table
CREATE TABLE IF NOT EXISTS "langgraph"."assistant_checkpoints" (
    "user_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "parent_checkpoint_id" text,
    "type" text,
    "checkpoint" jsonb NOT NULL,
    "metadata" jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT "assistant_checkpoints_pkey" PRIMARY KEY ("user_id", "thread_id", "checkpoint_ns", "checkpoint_id")
);

-- langgraph.assistant_checkpoints: comment
COMMENT ON TABLE "langgraph"."assistant_checkpoints" IS 'LangGraph checkpoints (thread state) of agent ''assistant'', isolated by user_id (row-level security).';

-- langgraph.assistant_checkpoints: enable row level security
ALTER TABLE "langgraph"."assistant_checkpoints" ENABLE ROW LEVEL SECURITY;

-- langgraph.assistant_checkpoints: force row level security
ALTER TABLE "langgraph"."assistant_checkpoints" FORCE ROW LEVEL SECURITY;

-- langgraph.assistant_checkpoints: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "langgraph"."assistant_checkpoints";

-- langgraph.assistant_checkpoints: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "langgraph"."assistant_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.assistant_checkpoints: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "langgraph"."assistant_checkpoints";

-- langgraph.assistant_checkpoints: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "langgraph"."assistant_checkpoints" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.assistant_checkpoints: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "langgraph"."assistant_checkpoints";

-- langgraph.assistant_checkpoints: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "langgraph"."assistant_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.assistant_checkpoints: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "langgraph"."assistant_checkpoints";

-- langgraph.assistant_checkpoints: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "langgraph"."assistant_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.assistant_checkpoints: reset grants
REVOKE ALL ON TABLE "langgraph"."assistant_checkpoints" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.assistant_checkpoints: grants for the app role
GRANT SELECT, INSERT, UPDATE ("checkpoint", "metadata") ON TABLE "langgraph"."assistant_checkpoints" TO "primitives_app";

-- langgraph.assistant_checkpoints: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."assistant_checkpoints" TO "primitives_auditor";

-- langgraph.assistant_checkpoint_blobs: table
CREATE TABLE IF NOT EXISTS "langgraph"."assistant_checkpoint_blobs" (
    "user_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "channel" text NOT NULL,
    "version" text NOT NULL,
    "type" text NOT NULL,
    "blob" bytea,
    CONSTRAINT "assistant_checkpoint_blobs_pkey" PRIMARY KEY ("user_id", "thread_id", "checkpoint_ns", "channel", "version")
);

-- langgraph.assistant_checkpoint_blobs: comment
COMMENT ON TABLE "langgraph"."assistant_checkpoint_blobs" IS 'LangGraph channel values by version, serialized by the saver, of agent ''assistant'', isolated by user_id (row-level security).';

-- langgraph.assistant_checkpoint_blobs: enable row level security
ALTER TABLE "langgraph"."assistant_checkpoint_blobs" ENABLE ROW LEVEL SECURITY;

-- langgraph.assistant_checkpoint_blobs: force row level security
ALTER TABLE "langgraph"."assistant_checkpoint_blobs" FORCE ROW LEVEL SECURITY;

-- langgraph.assistant_checkpoint_blobs: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "langgraph"."assistant_checkpoint_blobs";

-- langgraph.assistant_checkpoint_blobs: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "langgraph"."assistant_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.assistant_checkpoint_blobs: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "langgraph"."assistant_checkpoint_blobs";

-- langgraph.assistant_checkpoint_blobs: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "langgraph"."assistant_checkpoint_blobs" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.assistant_checkpoint_blobs: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "langgraph"."assistant_checkpoint_blobs";

-- langgraph.assistant_checkpoint_blobs: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "langgraph"."assistant_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.assistant_checkpoint_blobs: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "langgraph"."assistant_checkpoint_blobs";

-- langgraph.assistant_checkpoint_blobs: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "langgraph"."assistant_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.assistant_checkpoint_blobs: reset grants
REVOKE ALL ON TABLE "langgraph"."assistant_checkpoint_blobs" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.assistant_checkpoint_blobs: grants for the app role
GRANT SELECT, INSERT ON TABLE "langgraph"."assistant_checkpoint_blobs" TO "primitives_app";

-- langgraph.assistant_checkpoint_blobs: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."assistant_checkpoint_blobs" TO "primitives_auditor";

-- langgraph.assistant_checkpoint_writes: table
CREATE TABLE IF NOT EXISTS "langgraph"."assistant_checkpoint_writes" (
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
    CONSTRAINT "assistant_checkpoint_writes_pkey" PRIMARY KEY ("user_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
);

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_threads (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."assistant_checkpoints_delete_threads"(text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."assistant_checkpoint_writes" WHERE "user_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."assistant_checkpoint_blobs" WHERE "user_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."assistant_checkpoints" WHERE "user_id" = primitives.current_tenant() AND thread_id = ANY ($1)
$fn$;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_threads: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."assistant_checkpoints_delete_threads"(text[]) FROM PUBLIC;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_threads: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."assistant_checkpoints_delete_threads"(text[]) TO "primitives_app";

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_runs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."assistant_checkpoints_delete_runs"(text[]) RETURNS TABLE (thread text, namespace text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH gone AS (DELETE FROM "langgraph"."assistant_checkpoints" WHERE "user_id" = primitives.current_tenant() AND metadata ->> 'run_id' = ANY ($1) RETURNING thread_id, checkpoint_ns, checkpoint_id),
writes AS (DELETE FROM "langgraph"."assistant_checkpoint_writes" AS w USING gone WHERE w."user_id" = primitives.current_tenant() AND w.thread_id = gone.thread_id AND w.checkpoint_ns = gone.checkpoint_ns AND w.checkpoint_id = gone.checkpoint_id)
SELECT DISTINCT gone.thread_id, gone.checkpoint_ns FROM gone
$fn$;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_runs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."assistant_checkpoints_delete_runs"(text[]) FROM PUBLIC;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_runs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."assistant_checkpoints_delete_runs"(text[]) TO "primitives_app";

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_blobs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."assistant_checkpoints_delete_blobs"(text[], text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."assistant_checkpoint_blobs" AS b USING unnest($1, $2) AS p(thread_id, checkpoint_ns) WHERE b."user_id" = primitives.current_tenant() AND b.thread_id = p.thread_id AND b.checkpoint_ns = p.checkpoint_ns AND NOT EXISTS (SELECT 1 FROM "langgraph"."assistant_checkpoints" AS c WHERE c."user_id" = b."user_id" AND c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
$fn$;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_blobs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."assistant_checkpoints_delete_blobs"(text[], text[]) FROM PUBLIC;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_delete_blobs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."assistant_checkpoints_delete_blobs"(text[], text[]) TO "primitives_app";

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_prune (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."assistant_checkpoints_prune"(text, text, text, text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."assistant_checkpoint_writes" WHERE "user_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
DELETE FROM "langgraph"."assistant_checkpoints" WHERE "user_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
UPDATE "langgraph"."assistant_checkpoints" SET parent_checkpoint_id = NULL WHERE "user_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY ($4) AND parent_checkpoint_id <> ALL ($4)
$fn$;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_prune: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."assistant_checkpoints_prune"(text, text, text, text[]) FROM PUBLIC;

-- langgraph.assistant_checkpoint_writes: function langgraph.assistant_checkpoints_prune: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."assistant_checkpoints_prune"(text, text, text, text[]) TO "primitives_app";

-- langgraph.assistant_checkpoint_writes: comment
COMMENT ON TABLE "langgraph"."assistant_checkpoint_writes" IS 'LangGraph pending writes of checkpoints of agent ''assistant'', isolated by user_id (row-level security).';

-- langgraph.assistant_checkpoint_writes: enable row level security
ALTER TABLE "langgraph"."assistant_checkpoint_writes" ENABLE ROW LEVEL SECURITY;

-- langgraph.assistant_checkpoint_writes: force row level security
ALTER TABLE "langgraph"."assistant_checkpoint_writes" FORCE ROW LEVEL SECURITY;

-- langgraph.assistant_checkpoint_writes: replace policy assistant_tenant_isolation
DROP POLICY IF EXISTS "assistant_tenant_isolation" ON "langgraph"."assistant_checkpoint_writes";

-- langgraph.assistant_checkpoint_writes: policy assistant_tenant_isolation
CREATE POLICY "assistant_tenant_isolation" ON "langgraph"."assistant_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.assistant_checkpoint_writes: replace policy assistant_auditor_read
DROP POLICY IF EXISTS "assistant_auditor_read" ON "langgraph"."assistant_checkpoint_writes";

-- langgraph.assistant_checkpoint_writes: policy assistant_auditor_read
CREATE POLICY "assistant_auditor_read" ON "langgraph"."assistant_checkpoint_writes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.assistant_checkpoint_writes: replace policy assistant_owner_tenant
DROP POLICY IF EXISTS "assistant_owner_tenant" ON "langgraph"."assistant_checkpoint_writes";

-- langgraph.assistant_checkpoint_writes: policy assistant_owner_tenant
CREATE POLICY "assistant_owner_tenant" ON "langgraph"."assistant_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("user_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.assistant_checkpoint_writes: replace policy assistant_maintainer
DROP POLICY IF EXISTS "assistant_maintainer" ON "langgraph"."assistant_checkpoint_writes";

-- langgraph.assistant_checkpoint_writes: policy assistant_maintainer
CREATE POLICY "assistant_maintainer" ON "langgraph"."assistant_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.assistant_checkpoint_writes: reset grants
REVOKE ALL ON TABLE "langgraph"."assistant_checkpoint_writes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.assistant_checkpoint_writes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("channel", "type", "blob") ON TABLE "langgraph"."assistant_checkpoint_writes" TO "primitives_app";

-- langgraph.assistant_checkpoint_writes: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."assistant_checkpoint_writes" TO "primitives_auditor";

-- memory.assistant_memories: drop trigger primitives_publish if an earlier plan published (this spec publishes nothing)
DROP TRIGGER IF EXISTS "primitives_publish" ON "memory"."assistant_memories";

-- memory.assistant_active_memories: view
CREATE OR REPLACE VIEW "memory"."assistant_active_memories" WITH (security_invoker = true) AS
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
       "m"."embedding",
       "m"."embedding_model",
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
FROM "memory"."assistant_memories" AS m
WHERE "m"."superseded_at" IS NULL AND "m"."invalidated_at" IS NULL AND "m"."archived_at" IS NULL AND "m"."tombstoned_at" IS NULL AND m.erased_at IS NULL
  AND (m.expires_at IS NULL OR m.expires_at > now());

-- memory.assistant_active_memories: comment
COMMENT ON VIEW "memory"."assistant_active_memories" IS 'Memory rows of agent ''assistant'' currently in retrieval (not superseded, invalidated, archived, tombstoned, erased or expired).';

-- memory.assistant_active_memories: reset grants
REVOKE ALL ON TABLE "memory"."assistant_active_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_active_memories: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_active_memories" TO "primitives_app";

-- memory.assistant_active_memories: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_active_memories" TO "primitives_auditor";

-- memory.assistant_audit_lineage: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_lineage" WITH (security_invoker = true) AS
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
FROM "memory"."assistant_memory_events" AS e
LEFT JOIN "memory"."assistant_memories" AS m ON "m"."user_id" = "e"."user_id" AND "m"."id" = "e"."memory_id"
WHERE e.memory_id IS NOT NULL;

-- memory.assistant_audit_lineage: comment
COMMENT ON VIEW "memory"."assistant_audit_lineage" IS 'Lineage: every journal event of each memory of agent ''assistant'', in order (step 1, 2, ...).';

-- memory.assistant_audit_lineage: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_lineage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_lineage: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_lineage" TO "primitives_app";

-- memory.assistant_audit_lineage: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_lineage" TO "primitives_auditor";

-- memory.assistant_audit_supersession: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_supersession" WITH (security_invoker = true) AS
WITH RECURSIVE chain AS (
    SELECT "m"."user_id", m.id AS root_id, m.id AS memory_id, m.superseded_by, 0 AS depth, ARRAY[m.id] AS path
    FROM "memory"."assistant_memories" AS m
    WHERE m.superseded_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM "memory"."assistant_memories" AS p WHERE "p"."user_id" = "m"."user_id" AND p.superseded_by = m.id)
    UNION ALL
    SELECT "c"."user_id", c.root_id, n.id, n.superseded_by, c.depth + 1, c.path || n.id
    FROM chain AS c
    JOIN "memory"."assistant_memories" AS n ON "n"."user_id" = "c"."user_id" AND "n"."id" = "c"."superseded_by"
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
JOIN "memory"."assistant_memories" AS m ON "m"."user_id" = "c"."user_id" AND "m"."id" = "c"."memory_id";

-- memory.assistant_audit_supersession: comment
COMMENT ON VIEW "memory"."assistant_audit_supersession" IS 'Supersession chains of agent ''assistant'': root_id is the oldest version, depth counts versions after it, is_latest marks the newest.';

-- memory.assistant_audit_supersession: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_supersession" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_supersession: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_supersession" TO "primitives_app";

-- memory.assistant_audit_supersession: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_supersession" TO "primitives_auditor";

-- memory.assistant_audit_action_basis: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_action_basis" WITH (security_invoker = true) AS
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
FROM "memory"."assistant_action_links" AS l
JOIN "memory"."assistant_memories" AS m ON "m"."user_id" = "l"."user_id" AND "m"."id" = "l"."memory_id";

-- memory.assistant_audit_action_basis: comment
COMMENT ON VIEW "memory"."assistant_audit_action_basis" IS 'The memory rows each action of agent ''assistant'' relied on, with their state now.';

-- memory.assistant_audit_action_basis: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_action_basis" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_action_basis: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_action_basis" TO "primitives_app";

-- memory.assistant_audit_action_basis: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_action_basis" TO "primitives_auditor";

-- memory.assistant_audit_retention_state: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_retention_state" WITH (security_invoker = true) AS
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
FROM "memory"."assistant_memories" AS m
CROSS JOIN LATERAL (SELECT count(*) AS link_count FROM "memory"."assistant_action_links" AS l WHERE "m"."user_id" = "l"."user_id" AND "m"."id" = "l"."memory_id") AS k;

-- memory.assistant_audit_retention_state: comment
COMMENT ON VIEW "memory"."assistant_audit_retention_state" IS 'Retention state of each memory of agent ''assistant'': ACTIVE, REFERENCED, ORPHANED, TOMBSTONED.';

-- memory.assistant_audit_retention_state: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_retention_state" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_retention_state: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_retention_state" TO "primitives_app";

-- memory.assistant_audit_retention_state: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_retention_state" TO "primitives_auditor";

-- memory.assistant_audit_erasures: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_erasures" WITH (security_invoker = true) AS
SELECT "m"."user_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."key",
       "m"."erased_at",
       "m"."erasure_reason",
       x.seq AS "erasure_event_seq",
       coalesce(m.content !~ '^sha256:[0-9a-f]{64}$' OR m.value <> '{}'::jsonb OR m.envelope <> '{}'::jsonb OR m.provenance <> '{}'::jsonb OR m.tags <> '{}'::text[] OR m.source IS NOT NULL OR m.embedding IS NOT NULL OR EXISTS (SELECT 1 FROM "memory"."assistant_edges" AS g WHERE "g"."user_id" = "m"."user_id" AND (g.source_id = m.id OR g.target_id = m.id) AND g.evidence <> '[]'::jsonb) OR EXISTS (SELECT 1 FROM "memory"."assistant_entities" AS n WHERE "n"."user_id" = "m"."user_id" AND (encode(sha256(convert_to(lower("n"."canonical_name"), 'UTF8')), 'hex') = x.subject_sha256 OR EXISTS (SELECT 1 FROM unnest(n.aliases) AS a WHERE encode(sha256(convert_to(lower("a"), 'UTF8')), 'hex') = x.subject_sha256))), false) AS "residue"
FROM "memory"."assistant_memories" AS m
LEFT JOIN LATERAL (SELECT e.seq, e.payload ->> 'subject_sha256' AS subject_sha256 FROM "memory"."assistant_memory_events" AS e WHERE "e"."user_id" = "m"."user_id" AND e.memory_id = m.id AND e.kind = 'erased' ORDER BY e.seq DESC LIMIT 1) AS x ON true
WHERE m.erased_at IS NOT NULL;

-- memory.assistant_audit_erasures: comment
COMMENT ON VIEW "memory"."assistant_audit_erasures" IS 'Erased memory of agent ''assistant''; residue is true when anything beyond the content hash remains (must always be false).';

-- memory.assistant_audit_erasures: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_erasures" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_erasures: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_erasures" TO "primitives_app";

-- memory.assistant_audit_erasures: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_erasures" TO "primitives_auditor";

-- memory.assistant_audit_sanitization: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_sanitization" WITH (security_invoker = true) AS
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
FROM "memory"."assistant_memory_events" AS e
WHERE e.kind = 'sanitized';

-- memory.assistant_audit_sanitization: comment
COMMENT ON VIEW "memory"."assistant_audit_sanitization" IS 'Memory of agent ''assistant'' that crossed a sanitization gate, from the journal.';

-- memory.assistant_audit_sanitization: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_sanitization" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_sanitization: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_sanitization" TO "primitives_app";

-- memory.assistant_audit_sanitization: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_sanitization" TO "primitives_auditor";

-- memory.assistant_audit_redactions: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_redactions" WITH (security_invoker = true) AS
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
FROM "memory"."assistant_memory_events" AS e
WHERE e.kind IN ('pii_redacted', 'pii_consent', 'pii_raw_read');

-- memory.assistant_audit_redactions: comment
COMMENT ON VIEW "memory"."assistant_audit_redactions" IS 'Personal data of agent ''assistant'' redacted before writes, consents recorded and raw reads by the privacy admin, from the journal (kinds and counts, never a value).';

-- memory.assistant_audit_redactions: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_redactions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_redactions: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_redactions" TO "primitives_app";

-- memory.assistant_audit_redactions: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_redactions" TO "primitives_auditor";

-- memory.assistant_audit_policy_coverage: view
CREATE OR REPLACE VIEW "memory"."assistant_audit_policy_coverage" WITH (security_invoker = true) AS
SELECT "r"."table_schema",
       "r"."table_name",
       c.oid IS NOT NULL AS "present",
       coalesce(c.relrowsecurity, false) AS "rls_enabled",
       coalesce(c.relforcerowsecurity, false) AS "rls_forced",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'assistant_tenant_isolation') AS "tenant_policy",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'assistant_auditor_read') AS "auditor_policy",
       pg_catalog.pg_get_userbyid(c.relowner) AS "owner"
FROM (VALUES ('memory', 'assistant_memories'),
             ('memory', 'assistant_memory_events'),
             ('memory', 'assistant_action_links'),
             ('memory', 'assistant_scopes'),
             ('memory', 'assistant_promotions'),
             ('memory', 'assistant_edges'),
             ('memory', 'assistant_entities'),
             ('memory', 'assistant_node_entities'),
             ('memory', 'assistant_sessions'),
             ('langgraph', 'assistant_checkpoints'),
             ('langgraph', 'assistant_checkpoint_blobs'),
             ('langgraph', 'assistant_checkpoint_writes')) AS r (table_schema, table_name)
LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = r.table_schema
LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = r.table_name AND c.relkind IN ('r', 'p');

-- memory.assistant_audit_policy_coverage: comment
COMMENT ON VIEW "memory"."assistant_audit_policy_coverage" IS 'Row-level security coverage of every table of agent ''assistant'' (tenant column user_id), read from the catalog.';

-- memory.assistant_audit_policy_coverage: reset grants
REVOKE ALL ON TABLE "memory"."assistant_audit_policy_coverage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- memory.assistant_audit_policy_coverage: grants for the app role
GRANT SELECT ON TABLE "memory"."assistant_audit_policy_coverage" TO "primitives_app";

-- memory.assistant_audit_policy_coverage: grants for the auditor role
GRANT SELECT ON TABLE "memory"."assistant_audit_policy_coverage" TO "primitives_auditor";

-- after the plan commits, each in its own transaction (readers and writers are not blocked):

-- memory.assistant_memories: validate the checks against the existing rows
ALTER TABLE "memory"."assistant_memories"
    VALIDATE CONSTRAINT "assistant_memories_bounds_check";

-- memory.assistant_scopes: validate the checks against the existing rows
ALTER TABLE "memory"."assistant_scopes"
    VALIDATE CONSTRAINT "assistant_scopes_tier_check";

-- memory.assistant_entities: validate the checks against the existing rows
ALTER TABLE "memory"."assistant_entities"
    VALIDATE CONSTRAINT "assistant_entities_name_check",
    VALIDATE CONSTRAINT "assistant_entities_summary_check",
    VALIDATE CONSTRAINT "assistant_entities_type_check";

-- memory.assistant_edges: validate the checks against the existing rows
ALTER TABLE "memory"."assistant_edges"
    VALIDATE CONSTRAINT "assistant_edges_relation_type_check",
    VALIDATE CONSTRAINT "assistant_edges_confidence_check",
    VALIDATE CONSTRAINT "assistant_edges_evidence_check";
