-- primitives plan for agent 'spectral': 277 statements
-- store platform.spectral_*, tenant column workspace_id; extensions: vector, trigram, btree_gin; leakproof full-text match

-- objects are owned by the owner role
SET LOCAL ROLE "primitives_owner";

-- schema platform
CREATE SCHEMA IF NOT EXISTS "platform" AUTHORIZATION "primitives_owner";

-- schema platform: usage for the runtime roles
GRANT USAGE ON SCHEMA "platform" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- schema langgraph
CREATE SCHEMA IF NOT EXISTS "langgraph" AUTHORIZATION "primitives_owner";

-- schema langgraph: usage for the runtime roles
GRANT USAGE ON SCHEMA "langgraph" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_memories: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_memories" (
    "workspace_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "tier" text NOT NULL,
    "typology" text NOT NULL,
    "persistent" boolean GENERATED ALWAYS AS ("tier" = 'workspace') STORED,
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
    CONSTRAINT "spectral_memories_pkey" PRIMARY KEY ("workspace_id", "id")
);

-- platform.spectral_memories: columns added since the table first shipped
ALTER TABLE "platform"."spectral_memories" ADD COLUMN IF NOT EXISTS "corroborated_at" timestamptz, ADD COLUMN IF NOT EXISTS "age_ticks" integer, ADD COLUMN IF NOT EXISTS "reference_ticks" integer[];

-- platform.spectral_memories: bounds function platform.spectral_memories_bounds (its CHECKs, planned once per session)
CREATE OR REPLACE FUNCTION "platform"."spectral_memories_bounds"("tier" text, "typology" text, "content" text, "value" jsonb, "envelope" jsonb, "provenance" jsonb, "confidence" real, "erased_at" timestamptz, "erasure_reason" text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $bounds$
BEGIN
    -- every bound at once: one expression, the common case
    IF ((tier IN ('cycle', 'run', 'workspace'))
        AND ((tier || ':' || typology) = ANY ('{cycle:episodic,run:episodic,workspace:episodic,workspace:semantic,workspace:procedural}'::text[]))
        AND (char_length(content) <= 4000)
        AND (octet_length("value"::text) <= 32768)
        AND (octet_length("envelope"::text) <= 8192)
        AND (octet_length("provenance"::text) <= 32768)
        AND (confidence BETWEEN 0 AND 1)
        AND (erased_at IS NULL OR erasure_reason IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- a bound is broken: fail as its own constraint would
    IF (tier IN ('cycle', 'run', 'workspace')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_tier_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_tier_check"';
    END IF;
    IF ((tier || ':' || typology) = ANY ('{cycle:episodic,run:episodic,workspace:episodic,workspace:semantic,workspace:procedural}'::text[])) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_typology_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_typology_check"';
    END IF;
    IF (char_length(content) <= 4000) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_content_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_content_check"';
    END IF;
    IF (octet_length("value"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_value_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_value_check"';
    END IF;
    IF (octet_length("envelope"::text) <= 8192) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_envelope_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_envelope_check"';
    END IF;
    IF (octet_length("provenance"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_provenance_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_provenance_check"';
    END IF;
    IF (confidence BETWEEN 0 AND 1) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_confidence_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_confidence_check"';
    END IF;
    IF (erased_at IS NULL OR erasure_reason IS NOT NULL) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'platform',
            TABLE = 'spectral_memories', CONSTRAINT = 'spectral_memories_erasure_check',
            MESSAGE = 'new row for relation "spectral_memories" violates check constraint "spectral_memories_erasure_check"';
    END IF;
    RETURN true;
END
$bounds$;

-- platform.spectral_memories: bounds function: not callable by PUBLIC
REVOKE ALL ON FUNCTION "platform"."spectral_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) FROM PUBLIC;

-- platform.spectral_memories: bounds function: the app role writes the table
GRANT EXECUTE ON FUNCTION "platform"."spectral_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_app";

-- platform.spectral_memories: bounds function: the maintainer role writes the table
GRANT EXECUTE ON FUNCTION "platform"."spectral_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_maintainer";

-- platform.spectral_memories: checks (replaced, so they follow the spec)
ALTER TABLE "platform"."spectral_memories"
    DROP CONSTRAINT IF EXISTS "spectral_memories_tier_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_typology_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_content_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_value_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_envelope_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_provenance_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_confidence_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_erasure_check",
    DROP CONSTRAINT IF EXISTS "spectral_memories_bounds_check",
    ADD CONSTRAINT "spectral_memories_bounds_check" CHECK ("platform"."spectral_memories_bounds"("tier", "typology", "content", "value", "envelope", "provenance", "confidence", "erased_at", "erasure_reason")) NOT VALID;

-- platform.spectral_memories: drop index spectral_memories_envelope_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "platform"."spectral_memories_envelope_idx";

-- platform.spectral_memories: drop index spectral_memories_tags_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "platform"."spectral_memories_tags_idx";

-- platform.spectral_memories: index spectral_memories_current_key
CREATE UNIQUE INDEX IF NOT EXISTS "spectral_memories_current_key" ON "platform"."spectral_memories" USING btree ("workspace_id", "tier", "namespace", "key") WHERE superseded_at IS NULL AND tombstoned_at IS NULL;

-- platform.spectral_memories: index spectral_memories_recent_idx
CREATE INDEX IF NOT EXISTS "spectral_memories_recent_idx" ON "platform"."spectral_memories" USING btree ("workspace_id", "tier", created_at DESC) WHERE "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- platform.spectral_memories: index spectral_memories_scope_idx
CREATE INDEX IF NOT EXISTS "spectral_memories_scope_idx" ON "platform"."spectral_memories" USING btree ("workspace_id", "scope_id", "tier") WHERE scope_id IS NOT NULL;

-- platform.spectral_memories: index spectral_memories_superseded_by_idx
CREATE INDEX IF NOT EXISTS "spectral_memories_superseded_by_idx" ON "platform"."spectral_memories" USING btree ("workspace_id", "superseded_by") WHERE superseded_by IS NOT NULL;

-- platform.spectral_memories: index spectral_memories_expires_idx
CREATE INDEX IF NOT EXISTS "spectral_memories_expires_idx" ON "platform"."spectral_memories" USING btree ("workspace_id", "expires_at") WHERE expires_at IS NOT NULL;

-- platform.spectral_memories: drop index spectral_memories_tsv_idx (replaced by spectral_memories_tsv_match_idx)
DROP INDEX IF EXISTS "platform"."spectral_memories_tsv_idx";

-- platform.spectral_memories: index spectral_memories_tsv_match_idx
CREATE INDEX IF NOT EXISTS "spectral_memories_tsv_match_idx" ON "platform"."spectral_memories" USING gin ("workspace_id", tsv primitives.tsvector_match_ops);

-- platform.spectral_memories: drop earlier definitions of index spectral_memories_corroboration_due_5029755a (spectral_memories_corroboration_due_*)
DO $fn$ DECLARE r record; BEGIN FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass('"platform"."spectral_memories"') AND starts_with(c.relname, 'spectral_memories_corroboration_due_') AND c.relname <> 'spectral_memories_corroboration_due_5029755a' LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', 'platform', r.relname); END LOOP; END $fn$;

-- platform.spectral_memories: index spectral_memories_corroboration_due_5029755a
CREATE INDEX IF NOT EXISTS "spectral_memories_corroboration_due_5029755a" ON "platform"."spectral_memories" USING btree ("workspace_id", ((extract(epoch FROM timezone('UTC', coalesce("corroborated_at", "valid_from"))) + '7776000.0'::numeric * (1 + CASE WHEN jsonb_typeof("provenance" #> '{corroboration,epoch}') = 'number' AND jsonb_typeof("provenance" #> '{corroboration,failed}') = 'number' THEN CASE WHEN ("provenance" #> '{corroboration,epoch}')::numeric = extract(epoch FROM timezone('UTC', coalesce("corroborated_at", "valid_from"))) THEN ("provenance" #> '{corroboration,failed}')::numeric ELSE 0 END ELSE 0 END)))) WHERE "typology" = ANY('{semantic}'::text[]) AND "persistent" AND "decay_rate" IS DISTINCT FROM 0 AND "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- platform.spectral_memories: drop earlier definitions of index spectral_memories_dispositions_baaa1e8a (spectral_memories_dispositions_*)
DO $fn$ DECLARE r record; BEGIN FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass('"platform"."spectral_memories"') AND starts_with(c.relname, 'spectral_memories_dispositions_') AND c.relname <> 'spectral_memories_dispositions_baaa1e8a' LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', 'platform', r.relname); END LOOP; END $fn$;

-- platform.spectral_memories: index spectral_memories_dispositions_baaa1e8a
CREATE INDEX IF NOT EXISTS "spectral_memories_dispositions_baaa1e8a" ON "platform"."spectral_memories" USING btree ("workspace_id", "typology", "event_time") WHERE "typology" = ANY('{episodic}'::text[]) AND "persistent" AND "decay_rate" IS DISTINCT FROM 0 AND "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- platform.spectral_memories: drop earlier definitions of index spectral_memories_evidence_93838ca5 (spectral_memories_evidence_*)
DO $fn$ DECLARE r record; BEGIN FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass('"platform"."spectral_memories"') AND starts_with(c.relname, 'spectral_memories_evidence_') AND c.relname <> 'spectral_memories_evidence_93838ca5' LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', 'platform', r.relname); END LOOP; END $fn$;

-- platform.spectral_memories: index spectral_memories_evidence_93838ca5
CREATE INDEX IF NOT EXISTS "spectral_memories_evidence_93838ca5" ON "platform"."spectral_memories" USING btree ("workspace_id", "tier", "typology") WHERE CASE WHEN jsonb_typeof("provenance" -> 'corroborated_by') = 'array' THEN jsonb_array_length("provenance" -> 'corroborated_by') ELSE 0 END >= 3 AND "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- platform.spectral_memories: index spectral_memories_embedding_idx
CREATE INDEX IF NOT EXISTS "spectral_memories_embedding_idx" ON "platform"."spectral_memories" USING hnsw (embedding halfvec_cosine_ops);

-- platform.spectral_memories: function platform.spectral_delete_transient (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "platform"."spectral_delete_transient"(uuid) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "platform"."spectral_memories" AS m WHERE m."workspace_id" = primitives.current_tenant() AND m.id = $1 RETURNING true
$fn$;

-- platform.spectral_memories: function platform.spectral_delete_transient: not callable by PUBLIC
REVOKE ALL ON FUNCTION "platform"."spectral_delete_transient"(uuid) FROM PUBLIC;

-- platform.spectral_memories: function platform.spectral_delete_transient: callable by the app role
GRANT EXECUTE ON FUNCTION "platform"."spectral_delete_transient"(uuid) TO "primitives_app";

-- platform.spectral_memories: drop trigger primitives_capacity_guard (no tier declares a capacity that refuses)
DROP TRIGGER IF EXISTS "primitives_capacity_guard" ON "platform"."spectral_memories";

-- platform.spectral_memories: trigger primitives_guard_delete
CREATE OR REPLACE TRIGGER "primitives_guard_delete" BEFORE DELETE ON "platform"."spectral_memories" FOR EACH ROW EXECUTE FUNCTION "primitives"."guard_memory_delete"('"platform"."spectral_action_links"', 'workspace_id');

-- platform.spectral_memories: comment
COMMENT ON TABLE "platform"."spectral_memories" IS 'Memory rows of agent ''spectral'' (tiers cycle, run, workspace; persistent tier ''workspace''), tenant column workspace_id. Rows leave retrieval by state change (superseded_at, invalidated_at, archived_at, tombstoned_at), never by DELETE of persistent or action-linked rows; every change is journalled in platform.spectral_memory_events. Non-mirror categories, held by reference and never copied here: world_model_rule_content, canonical_scan_results.';

-- platform.spectral_memories: enable row level security
ALTER TABLE "platform"."spectral_memories" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_memories: force row level security
ALTER TABLE "platform"."spectral_memories" FORCE ROW LEVEL SECURITY;

-- platform.spectral_memories: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_memories";

-- platform.spectral_memories: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_memories" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_memories: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_memories";

-- platform.spectral_memories: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_memories" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_memories: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_memories";

-- platform.spectral_memories: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_memories" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_memories: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_memories";

-- platform.spectral_memories: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_memories" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_memories: reset grants
REVOKE ALL ON TABLE "platform"."spectral_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_memories: grants for the app role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "embedding", "embedding_model", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks") ON TABLE "platform"."spectral_memories" TO "primitives_app";

-- platform.spectral_memories: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_memories" TO "primitives_auditor";

-- platform.spectral_memories: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "embedding", "embedding_model", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks"), DELETE ON TABLE "platform"."spectral_memories" TO "primitives_maintainer";

-- platform.spectral_memory_events: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_memory_events" (
    "workspace_id" text NOT NULL,
    "seq" bigint NOT NULL,
    "event_id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "prev_hash" text NOT NULL,
    "hash" text NOT NULL,
    "kind" text NOT NULL,
    "memory_id" uuid,
    "actor" text,
    "payload" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "occurred_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "spectral_memory_events_pkey" PRIMARY KEY ("workspace_id", "seq")
);

-- platform.spectral_memory_events: index spectral_memory_events_event_id_key
CREATE UNIQUE INDEX IF NOT EXISTS "spectral_memory_events_event_id_key" ON "platform"."spectral_memory_events" USING btree ("workspace_id", "event_id");

-- platform.spectral_memory_events: index spectral_memory_events_memory_idx
CREATE INDEX IF NOT EXISTS "spectral_memory_events_memory_idx" ON "platform"."spectral_memory_events" USING btree ("workspace_id", "memory_id", "seq") WHERE memory_id IS NOT NULL;

-- platform.spectral_memory_events: drop index spectral_memory_events_kind_idx (replaced by spectral_memory_events_kind_rare_idx)
DROP INDEX IF EXISTS "platform"."spectral_memory_events_kind_idx";

-- platform.spectral_memory_events: index spectral_memory_events_kind_rare_idx
CREATE INDEX IF NOT EXISTS "spectral_memory_events_kind_rare_idx" ON "platform"."spectral_memory_events" USING btree ("workspace_id", "kind", "seq") WHERE kind <> 'observed';

-- platform.spectral_memory_events: chain function platform.spectral_chain_event
CREATE OR REPLACE FUNCTION "platform"."spectral_chain_event"() RETURNS trigger
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
    IF NEW."workspace_id" IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'not_null_violation',
            MESSAGE = format('%I.%I: the tenant column %I must be set on every journal event',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME, 'workspace_id');
    END IF;

    -- One writer per (journal, tenant) at a time, until commit or rollback.
    -- (through primitives.tenant_xact_lock: runtime roles may not take advisory locks)
    PERFORM primitives.tenant_xact_lock(NEW."workspace_id", 'journal ' || TG_RELID::text);

    SELECT e.seq, e.hash INTO last_seq, last_hash
    FROM "platform"."spectral_memory_events" AS e
    WHERE e."workspace_id" = NEW."workspace_id"
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

-- platform.spectral_memory_events: chain function platform.spectral_chain_event: not callable by PUBLIC
REVOKE ALL ON FUNCTION "platform"."spectral_chain_event"() FROM PUBLIC;

-- platform.spectral_memory_events: function platform.spectral_erase_row: the earlier signature dropped
DROP FUNCTION IF EXISTS "platform"."spectral_erase_row"(uuid, text, text);

-- platform.spectral_memory_events: function platform.spectral_erase_row (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "platform"."spectral_erase_row"(uuid, text, uuid, text, jsonb) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH erased AS (UPDATE "platform"."spectral_memories" AS m SET content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), value = '{}'::jsonb, envelope = '{}'::jsonb, tags = '{}'::text[], provenance = '{}'::jsonb, source = NULL, embedding = NULL, erased_at = now(), erasure_reason = $2, updated_at = now() WHERE m."workspace_id" = primitives.current_tenant() AND m.id = $1 AND m.erased_at IS NULL RETURNING m.id)
INSERT INTO "platform"."spectral_memory_events" ("workspace_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true
$fn$;

-- platform.spectral_memory_events: function platform.spectral_erase_row: not callable by PUBLIC
REVOKE ALL ON FUNCTION "platform"."spectral_erase_row"(uuid, text, uuid, text, jsonb) FROM PUBLIC;

-- platform.spectral_memory_events: function platform.spectral_erase_row: callable by the app role
GRANT EXECUTE ON FUNCTION "platform"."spectral_erase_row"(uuid, text, uuid, text, jsonb) TO "primitives_app";

-- platform.spectral_memory_events: trigger primitives_chain_event
CREATE OR REPLACE TRIGGER "primitives_chain_event" BEFORE INSERT ON "platform"."spectral_memory_events" FOR EACH ROW EXECUTE FUNCTION "platform"."spectral_chain_event"();

-- platform.spectral_memory_events: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "platform"."spectral_memory_events" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- platform.spectral_memory_events: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "platform"."spectral_memory_events" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- platform.spectral_memory_events: comment
COMMENT ON TABLE "platform"."spectral_memory_events" IS 'Audit journal of agent ''spectral'': one event per memory change, written in the same transaction. Hash-chained per workspace_id (seq, prev_hash, hash set by platform.spectral_chain_event); UPDATE, DELETE and TRUNCATE are refused.';

-- platform.spectral_memory_events: enable row level security
ALTER TABLE "platform"."spectral_memory_events" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_memory_events: force row level security
ALTER TABLE "platform"."spectral_memory_events" FORCE ROW LEVEL SECURITY;

-- platform.spectral_memory_events: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_memory_events";

-- platform.spectral_memory_events: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_memory_events" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_memory_events: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_memory_events";

-- platform.spectral_memory_events: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_memory_events" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_memory_events: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_memory_events";

-- platform.spectral_memory_events: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_memory_events" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_memory_events: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_memory_events";

-- platform.spectral_memory_events: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_memory_events" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_memory_events: reset grants
REVOKE ALL ON TABLE "platform"."spectral_memory_events" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_memory_events: grants for the app role
GRANT SELECT, INSERT ON TABLE "platform"."spectral_memory_events" TO "primitives_app";

-- platform.spectral_memory_events: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_memory_events" TO "primitives_auditor";

-- platform.spectral_memory_events: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "platform"."spectral_memory_events" TO "primitives_maintainer";

-- platform.spectral_action_links: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_action_links" (
    "workspace_id" text NOT NULL,
    "action_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "kind" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "spectral_action_links_pkey" PRIMARY KEY ("workspace_id", "action_id", "memory_id"),
    CONSTRAINT "spectral_action_links_memory_fkey" FOREIGN KEY ("workspace_id", "memory_id") REFERENCES "platform"."spectral_memories" ("workspace_id", "id")
);

-- platform.spectral_action_links: index spectral_action_links_memory_idx
CREATE INDEX IF NOT EXISTS "spectral_action_links_memory_idx" ON "platform"."spectral_action_links" USING btree ("workspace_id", "memory_id");

-- platform.spectral_action_links: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "platform"."spectral_action_links" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- platform.spectral_action_links: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "platform"."spectral_action_links" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- platform.spectral_action_links: comment
COMMENT ON TABLE "platform"."spectral_action_links" IS 'Memory basis of each action of agent ''spectral''. Append-only; a linked memory row can never be hard-deleted (primitives.guard_memory_delete).';

-- platform.spectral_action_links: enable row level security
ALTER TABLE "platform"."spectral_action_links" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_action_links: force row level security
ALTER TABLE "platform"."spectral_action_links" FORCE ROW LEVEL SECURITY;

-- platform.spectral_action_links: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_action_links";

-- platform.spectral_action_links: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_action_links" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_action_links: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_action_links";

-- platform.spectral_action_links: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_action_links" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_action_links: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_action_links";

-- platform.spectral_action_links: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_action_links" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_action_links: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_action_links";

-- platform.spectral_action_links: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_action_links" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_action_links: reset grants
REVOKE ALL ON TABLE "platform"."spectral_action_links" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_action_links: grants for the app role
GRANT SELECT, INSERT ON TABLE "platform"."spectral_action_links" TO "primitives_app";

-- platform.spectral_action_links: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_action_links" TO "primitives_auditor";

-- platform.spectral_action_links: grants for the maintainer role
GRANT SELECT ON TABLE "platform"."spectral_action_links" TO "primitives_maintainer";

-- platform.spectral_scopes: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_scopes" (
    "workspace_id" text NOT NULL,
    "tier" text NOT NULL,
    "scope_id" text NOT NULL,
    "opened_at" timestamptz NOT NULL DEFAULT now(),
    "last_activity_at" timestamptz NOT NULL DEFAULT now(),
    "closed_at" timestamptz,
    CONSTRAINT "spectral_scopes_pkey" PRIMARY KEY ("workspace_id", "tier", "scope_id")
);

-- platform.spectral_scopes: checks (replaced, so they follow the spec)
ALTER TABLE "platform"."spectral_scopes"
    DROP CONSTRAINT IF EXISTS "spectral_scopes_tier_check",
    ADD CONSTRAINT "spectral_scopes_tier_check" CHECK (tier IN ('cycle', 'run', 'workspace')) NOT VALID;

-- platform.spectral_scopes: index spectral_scopes_open_idx
CREATE INDEX IF NOT EXISTS "spectral_scopes_open_idx" ON "platform"."spectral_scopes" USING btree ("workspace_id", "tier", "last_activity_at") WHERE closed_at IS NULL;

-- platform.spectral_scopes: comment
COMMENT ON TABLE "platform"."spectral_scopes" IS 'Scope instances (runs, sessions, jobs) of agent ''spectral'' by tier.';

-- platform.spectral_scopes: enable row level security
ALTER TABLE "platform"."spectral_scopes" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_scopes: force row level security
ALTER TABLE "platform"."spectral_scopes" FORCE ROW LEVEL SECURITY;

-- platform.spectral_scopes: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_scopes";

-- platform.spectral_scopes: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_scopes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_scopes: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_scopes";

-- platform.spectral_scopes: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_scopes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_scopes: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_scopes";

-- platform.spectral_scopes: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_scopes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_scopes: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_scopes";

-- platform.spectral_scopes: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_scopes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_scopes: reset grants
REVOKE ALL ON TABLE "platform"."spectral_scopes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_scopes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "platform"."spectral_scopes" TO "primitives_app";

-- platform.spectral_scopes: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_scopes" TO "primitives_auditor";

-- platform.spectral_scopes: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "platform"."spectral_scopes" TO "primitives_maintainer";

-- platform.spectral_promotions: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_promotions" (
    "workspace_id" text NOT NULL,
    "rule" text NOT NULL,
    "source_id" uuid NOT NULL,
    "target_id" uuid,
    "promoted_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "spectral_promotions_pkey" PRIMARY KEY ("workspace_id", "rule", "source_id")
);

-- platform.spectral_promotions: comment
COMMENT ON TABLE "platform"."spectral_promotions" IS 'Promotion ledger of agent ''spectral'': a (rule, source) pair is promoted at most once, so re-running a boundary is harmless.';

-- platform.spectral_promotions: enable row level security
ALTER TABLE "platform"."spectral_promotions" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_promotions: force row level security
ALTER TABLE "platform"."spectral_promotions" FORCE ROW LEVEL SECURITY;

-- platform.spectral_promotions: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_promotions";

-- platform.spectral_promotions: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_promotions" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_promotions: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_promotions";

-- platform.spectral_promotions: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_promotions" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_promotions: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_promotions";

-- platform.spectral_promotions: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_promotions" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_promotions: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_promotions";

-- platform.spectral_promotions: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_promotions" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_promotions: reset grants
REVOKE ALL ON TABLE "platform"."spectral_promotions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_promotions: grants for the app role
GRANT SELECT, INSERT ON TABLE "platform"."spectral_promotions" TO "primitives_app";

-- platform.spectral_promotions: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_promotions" TO "primitives_auditor";

-- platform.spectral_promotions: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "platform"."spectral_promotions" TO "primitives_maintainer";

-- platform.spectral_canonical_refs: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_canonical_refs" (
    "workspace_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "category" text NOT NULL,
    "canonical_key" text NOT NULL,
    "canonical_version" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    "actor" text,
    CONSTRAINT "spectral_canonical_refs_pkey" PRIMARY KEY ("workspace_id", "memory_id", "category", "canonical_key"),
    CONSTRAINT "spectral_canonical_refs_memory_fkey" FOREIGN KEY ("workspace_id", "memory_id") REFERENCES "platform"."spectral_memories" ("workspace_id", "id") ON DELETE CASCADE
);

-- platform.spectral_canonical_refs: checks (replaced, so they follow the spec)
ALTER TABLE "platform"."spectral_canonical_refs"
    DROP CONSTRAINT IF EXISTS "spectral_canonical_refs_category_check",
    DROP CONSTRAINT IF EXISTS "spectral_canonical_refs_bounds_check",
    ADD CONSTRAINT "spectral_canonical_refs_category_check" CHECK (category IN ('world_model_rule_content', 'canonical_scan_results')) NOT VALID,
    ADD CONSTRAINT "spectral_canonical_refs_bounds_check" CHECK (char_length(canonical_key) <= 512 AND char_length(canonical_version) <= 512) NOT VALID;

-- platform.spectral_canonical_refs: index spectral_canonical_refs_key_idx
CREATE INDEX IF NOT EXISTS "spectral_canonical_refs_key_idx" ON "platform"."spectral_canonical_refs" USING btree ("workspace_id", "category", "canonical_key");

-- platform.spectral_canonical_refs: function platform.spectral_canonical_version (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "platform"."spectral_canonical_version"(text, text[])
RETURNS TABLE (canonical_key text, canonical_version text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN;
END
$fn$;

-- platform.spectral_canonical_refs: function platform.spectral_canonical_version: not callable by PUBLIC
REVOKE ALL ON FUNCTION "platform"."spectral_canonical_version"(text, text[]) FROM PUBLIC;

-- platform.spectral_canonical_refs: function platform.spectral_canonical_version: callable by primitives_app
GRANT EXECUTE ON FUNCTION "platform"."spectral_canonical_version"(text, text[]) TO "primitives_app";

-- platform.spectral_canonical_refs: function platform.spectral_canonical_version: callable by primitives_maintainer
GRANT EXECUTE ON FUNCTION "platform"."spectral_canonical_version"(text, text[]) TO "primitives_maintainer";

-- platform.spectral_canonical_refs: comment
COMMENT ON TABLE "platform"."spectral_canonical_refs" IS 'References of agent ''spectral'' memory rows to canonical rows (non-mirror: notes reference canonical text instead of copying it), each pinned to the version it was written against; journalled as canonical_referenced events.';

-- platform.spectral_canonical_refs: enable row level security
ALTER TABLE "platform"."spectral_canonical_refs" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_canonical_refs: force row level security
ALTER TABLE "platform"."spectral_canonical_refs" FORCE ROW LEVEL SECURITY;

-- platform.spectral_canonical_refs: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_canonical_refs";

-- platform.spectral_canonical_refs: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_canonical_refs" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_canonical_refs: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_canonical_refs";

-- platform.spectral_canonical_refs: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_canonical_refs" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_canonical_refs: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_canonical_refs";

-- platform.spectral_canonical_refs: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_canonical_refs" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_canonical_refs: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_canonical_refs";

-- platform.spectral_canonical_refs: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_canonical_refs" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_canonical_refs: reset grants
REVOKE ALL ON TABLE "platform"."spectral_canonical_refs" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_canonical_refs: grants for the app role
GRANT SELECT, INSERT ON TABLE "platform"."spectral_canonical_refs" TO "primitives_app";

-- platform.spectral_canonical_refs: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_canonical_refs" TO "primitives_auditor";

-- platform.spectral_canonical_refs: grants for the maintainer role
GRANT SELECT ON TABLE "platform"."spectral_canonical_refs" TO "primitives_maintainer";

-- platform.spectral_outbox: table
CREATE TABLE IF NOT EXISTS "platform"."spectral_outbox" (
    "workspace_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "event" text NOT NULL,
    "gate" text NOT NULL,
    "to_ref" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "payload" jsonb NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    "delivered_at" timestamptz,
    "delivered_to" text,
    CONSTRAINT "spectral_outbox_pkey" PRIMARY KEY ("workspace_id", "id")
);

-- platform.spectral_outbox: index spectral_outbox_pending_idx
CREATE INDEX IF NOT EXISTS "spectral_outbox_pending_idx" ON "platform"."spectral_outbox" USING btree ("workspace_id", "created_at", "id") WHERE delivered_at IS NULL;

-- platform.spectral_outbox: publish function platform.spectral_publish
CREATE OR REPLACE FUNCTION "platform"."spectral_publish"() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    published bigint;
BEGIN
    IF NEW.tier = 'workspace' AND NEW.typology = 'semantic' THEN
        WITH crossing AS (
            SELECT s.*, CASE WHEN length(regexp_replace(replace(s.stripped_content, '[workspace]', ''), '\W', '', 'g')) < 3 THEN 'kept_specific' ELSE 'crossed' END AS outcome,
                   jsonb_build_object('content', s.stripped_content, 'envelope', s.envelope,
                                      'value', s.value, 'tier', NEW.tier,
                                      'typology', NEW.typology, 'key', NEW.key,
                                      'event_time', NEW.event_time,
                                      'provenance_tier', s.provenance_tier) AS body
            FROM (SELECT regexp_replace(regexp_replace(replace(replace(replace(replace(NEW."content", coalesce(nullif(NEW."workspace_id", ''), E'\x01'), '[workspace]'), coalesce(nullif(NEW."envelope" ->> 'workspace_id', ''), E'\x01'), '[workspace]'), coalesce(nullif(NEW."value" ->> 'workspace_id', ''), E'\x01'), '[workspace]'), coalesce(nullif(NEW."provenance" ->> 'workspace_id', ''), E'\x01'), '[workspace]'),  E'\\yws[-_][A-Za-z0-9]+\\y', '[workspace]', 'g'),  E'\\y[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\y', '[workspace]', 'g') AS stripped_content, (NEW."envelope" - '{workspace_id}'::text[]) AS envelope, (NEW."value" - '{workspace_id}'::text[]) AS value, jsonb_build_object('keys', to_jsonb(array_remove(ARRAY[CASE WHEN NEW."envelope" ? 'workspace_id' OR NEW."value" ? 'workspace_id' OR NEW."provenance" ? 'workspace_id' OR strpos(NEW."content", coalesce(nullif(NEW."workspace_id", ''), E'\x01')) > 0 THEN 'workspace_id' END]::text[], NULL)), 'patterns', regexp_count(NEW."content",  E'\\yws[-_][A-Za-z0-9]+\\y') + regexp_count(NEW."content",  E'\\y[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\y')) AS stripped, CASE WHEN NEW."provenance" ->> 'provenance_tier' = ANY('{canonical,corroborated,single_observation,inferred,contradicted,unknown}'::text[]) AND NEW."provenance" ->> 'provenance_tier' <> 'unknown' THEN NEW."provenance" ->> 'provenance_tier' WHEN jsonb_array_length(CASE WHEN jsonb_typeof(NEW."provenance" -> 'contradicted_by') = 'array' THEN NEW."provenance" -> 'contradicted_by' ELSE '[]'::jsonb END) > 0 THEN 'contradicted' WHEN NEW."provenance" ? 'canonical_ref' THEN 'canonical' WHEN jsonb_array_length(CASE WHEN jsonb_typeof(NEW."provenance" -> 'corroborated_by') = 'array' THEN NEW."provenance" -> 'corroborated_by' ELSE '[]'::jsonb END) >= 2 THEN 'corroborated' WHEN NEW."provenance" ? 'derived_from' THEN 'inferred' ELSE 'single_observation' END AS provenance_tier, (SELECT count(DISTINCT s.k) FROM (SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(NEW."provenance" -> 'corroborated_by') = 'array' THEN NEW."provenance" -> 'corroborated_by' ELSE '[]'::jsonb END) UNION ALL SELECT 'source:' || NEW."source") AS s(k) WHERE s.k IS NOT NULL) AS sources) AS s),
        boxed AS (
            INSERT INTO "platform"."spectral_outbox" ("workspace_id", event, gate, to_ref, memory_id, payload)
            SELECT NEW."workspace_id", e.event, 'strip_workspace_identifiers', 'world_signal', NEW.id, c.body
            FROM crossing AS c CROSS JOIN unnest('{platform.t3_memory.written}'::text[]) AS e(event)
            WHERE c.outcome = 'crossed'
            RETURNING id, event),
        journal AS (
            INSERT INTO "platform"."spectral_memory_events" ("workspace_id", event_id, kind, memory_id, actor, payload)
            SELECT NEW."workspace_id", gen_random_uuid(), 'sanitized', NEW.id, NEW.actor,
                   jsonb_build_object('gate', 'strip_workspace_identifiers', 'from', 'workspace.semantic', 'to', 'world_signal', 'transform', 'strip_identifiers', 'outcome', c.outcome, 'stripped', c.stripped, 'provenance_tier', c.provenance_tier, 'sources', c.sources, 'via', 'outbox') || jsonb_build_object('outbox', (SELECT coalesce(
                       jsonb_agg(b.id::text ORDER BY b.event), '[]'::jsonb) FROM boxed AS b))
            FROM crossing AS c
            RETURNING 1)
        SELECT count(pg_notify('spectral' || '.' || b.event,
                               json_build_object('id', b.id, 'event', b.event)::text))
               + (SELECT count(*) FROM journal)
        INTO published FROM boxed AS b;
    END IF;
    RETURN NULL;
END
$fn$;

-- platform.spectral_outbox: publish function spectral_publish: not callable by PUBLIC
REVOKE ALL ON FUNCTION "platform"."spectral_publish"() FROM PUBLIC;

-- platform.spectral_outbox: platform.spectral_memories: trigger primitives_publish
CREATE OR REPLACE TRIGGER "primitives_publish" AFTER INSERT ON "platform"."spectral_memories" FOR EACH ROW WHEN ((NEW.tier, NEW.typology) IN (('workspace', 'semantic'))) EXECUTE FUNCTION "platform"."spectral_publish"();

-- platform.spectral_outbox: function platform.spectral_erase_row (SECURITY DEFINER) (again: erasure also scrubs the row's published payloads)
CREATE OR REPLACE FUNCTION "platform"."spectral_erase_row"(uuid, text, uuid, text, jsonb) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH scrubbed AS (UPDATE "platform"."spectral_outbox" AS o SET payload = '{"erased": true}'::jsonb WHERE o."workspace_id" = primitives.current_tenant() AND o.memory_id = $1), erased AS (UPDATE "platform"."spectral_memories" AS m SET content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), value = '{}'::jsonb, envelope = '{}'::jsonb, tags = '{}'::text[], provenance = '{}'::jsonb, source = NULL, embedding = NULL, erased_at = now(), erasure_reason = $2, updated_at = now() WHERE m."workspace_id" = primitives.current_tenant() AND m.id = $1 AND m.erased_at IS NULL RETURNING m.id)
INSERT INTO "platform"."spectral_memory_events" ("workspace_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true
$fn$;

-- platform.spectral_outbox: function platform.spectral_erase_row: not callable by PUBLIC (again: erasure also scrubs the row's published payloads)
REVOKE ALL ON FUNCTION "platform"."spectral_erase_row"(uuid, text, uuid, text, jsonb) FROM PUBLIC;

-- platform.spectral_outbox: function platform.spectral_erase_row: callable by the app role (again: erasure also scrubs the row's published payloads)
GRANT EXECUTE ON FUNCTION "platform"."spectral_erase_row"(uuid, text, uuid, text, jsonb) TO "primitives_app";

-- platform.spectral_outbox: comment
COMMENT ON TABLE "platform"."spectral_outbox" IS 'Outbox of agent ''spectral'': memory that crossed a sanitization gate, sanitized, one entry per event (platform.t3_memory.written); written by platform.spectral_publish() in the transaction of the write, announced by NOTIFY on <prefix>.<event>, claimed by consumers of the tenant.';

-- platform.spectral_outbox: enable row level security
ALTER TABLE "platform"."spectral_outbox" ENABLE ROW LEVEL SECURITY;

-- platform.spectral_outbox: force row level security
ALTER TABLE "platform"."spectral_outbox" FORCE ROW LEVEL SECURITY;

-- platform.spectral_outbox: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "platform"."spectral_outbox";

-- platform.spectral_outbox: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "platform"."spectral_outbox" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_outbox: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "platform"."spectral_outbox";

-- platform.spectral_outbox: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "platform"."spectral_outbox" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- platform.spectral_outbox: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "platform"."spectral_outbox";

-- platform.spectral_outbox: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "platform"."spectral_outbox" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- platform.spectral_outbox: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "platform"."spectral_outbox";

-- platform.spectral_outbox: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "platform"."spectral_outbox" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- platform.spectral_outbox: reset grants
REVOKE ALL ON TABLE "platform"."spectral_outbox" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_outbox: grants for the app role
GRANT SELECT, INSERT, UPDATE ("delivered_at", "delivered_to") ON TABLE "platform"."spectral_outbox" TO "primitives_app";

-- platform.spectral_outbox: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_outbox" TO "primitives_auditor";

-- platform.spectral_outbox: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("delivered_at", "delivered_to") ON TABLE "platform"."spectral_outbox" TO "primitives_maintainer";

-- langgraph.spectral_checkpoints: table
CREATE TABLE IF NOT EXISTS "langgraph"."spectral_checkpoints" (
    "workspace_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "parent_checkpoint_id" text,
    "type" text,
    "checkpoint" jsonb NOT NULL,
    "metadata" jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT "spectral_checkpoints_pkey" PRIMARY KEY ("workspace_id", "thread_id", "checkpoint_ns", "checkpoint_id")
);

-- langgraph.spectral_checkpoints: comment
COMMENT ON TABLE "langgraph"."spectral_checkpoints" IS 'LangGraph checkpoints (thread state) of agent ''spectral'', isolated by workspace_id (row-level security).';

-- langgraph.spectral_checkpoints: enable row level security
ALTER TABLE "langgraph"."spectral_checkpoints" ENABLE ROW LEVEL SECURITY;

-- langgraph.spectral_checkpoints: force row level security
ALTER TABLE "langgraph"."spectral_checkpoints" FORCE ROW LEVEL SECURITY;

-- langgraph.spectral_checkpoints: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "langgraph"."spectral_checkpoints";

-- langgraph.spectral_checkpoints: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "langgraph"."spectral_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.spectral_checkpoints: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "langgraph"."spectral_checkpoints";

-- langgraph.spectral_checkpoints: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "langgraph"."spectral_checkpoints" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.spectral_checkpoints: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "langgraph"."spectral_checkpoints";

-- langgraph.spectral_checkpoints: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "langgraph"."spectral_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.spectral_checkpoints: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "langgraph"."spectral_checkpoints";

-- langgraph.spectral_checkpoints: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "langgraph"."spectral_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.spectral_checkpoints: reset grants
REVOKE ALL ON TABLE "langgraph"."spectral_checkpoints" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.spectral_checkpoints: grants for the app role
GRANT SELECT, INSERT, UPDATE ("checkpoint", "metadata") ON TABLE "langgraph"."spectral_checkpoints" TO "primitives_app";

-- langgraph.spectral_checkpoints: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."spectral_checkpoints" TO "primitives_auditor";

-- langgraph.spectral_checkpoint_blobs: table
CREATE TABLE IF NOT EXISTS "langgraph"."spectral_checkpoint_blobs" (
    "workspace_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "channel" text NOT NULL,
    "version" text NOT NULL,
    "type" text NOT NULL,
    "blob" bytea,
    CONSTRAINT "spectral_checkpoint_blobs_pkey" PRIMARY KEY ("workspace_id", "thread_id", "checkpoint_ns", "channel", "version")
);

-- langgraph.spectral_checkpoint_blobs: comment
COMMENT ON TABLE "langgraph"."spectral_checkpoint_blobs" IS 'LangGraph channel values by version, serialized by the saver, of agent ''spectral'', isolated by workspace_id (row-level security).';

-- langgraph.spectral_checkpoint_blobs: enable row level security
ALTER TABLE "langgraph"."spectral_checkpoint_blobs" ENABLE ROW LEVEL SECURITY;

-- langgraph.spectral_checkpoint_blobs: force row level security
ALTER TABLE "langgraph"."spectral_checkpoint_blobs" FORCE ROW LEVEL SECURITY;

-- langgraph.spectral_checkpoint_blobs: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "langgraph"."spectral_checkpoint_blobs";

-- langgraph.spectral_checkpoint_blobs: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "langgraph"."spectral_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.spectral_checkpoint_blobs: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "langgraph"."spectral_checkpoint_blobs";

-- langgraph.spectral_checkpoint_blobs: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "langgraph"."spectral_checkpoint_blobs" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.spectral_checkpoint_blobs: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "langgraph"."spectral_checkpoint_blobs";

-- langgraph.spectral_checkpoint_blobs: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "langgraph"."spectral_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.spectral_checkpoint_blobs: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "langgraph"."spectral_checkpoint_blobs";

-- langgraph.spectral_checkpoint_blobs: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "langgraph"."spectral_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.spectral_checkpoint_blobs: reset grants
REVOKE ALL ON TABLE "langgraph"."spectral_checkpoint_blobs" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.spectral_checkpoint_blobs: grants for the app role
GRANT SELECT, INSERT ON TABLE "langgraph"."spectral_checkpoint_blobs" TO "primitives_app";

-- langgraph.spectral_checkpoint_blobs: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."spectral_checkpoint_blobs" TO "primitives_auditor";

-- langgraph.spectral_checkpoint_writes: table
CREATE TABLE IF NOT EXISTS "langgraph"."spectral_checkpoint_writes" (
    "workspace_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "task_id" text NOT NULL,
    "task_path" text NOT NULL DEFAULT '',
    "idx" integer NOT NULL,
    "channel" text NOT NULL,
    "type" text,
    "blob" bytea NOT NULL,
    CONSTRAINT "spectral_checkpoint_writes_pkey" PRIMARY KEY ("workspace_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
);

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_threads (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."spectral_checkpoints_delete_threads"(text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."spectral_checkpoint_writes" WHERE "workspace_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."spectral_checkpoint_blobs" WHERE "workspace_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."spectral_checkpoints" WHERE "workspace_id" = primitives.current_tenant() AND thread_id = ANY ($1)
$fn$;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_threads: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."spectral_checkpoints_delete_threads"(text[]) FROM PUBLIC;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_threads: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."spectral_checkpoints_delete_threads"(text[]) TO "primitives_app";

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_runs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."spectral_checkpoints_delete_runs"(text[]) RETURNS TABLE (thread text, namespace text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH gone AS (DELETE FROM "langgraph"."spectral_checkpoints" WHERE "workspace_id" = primitives.current_tenant() AND metadata ->> 'run_id' = ANY ($1) RETURNING thread_id, checkpoint_ns, checkpoint_id),
writes AS (DELETE FROM "langgraph"."spectral_checkpoint_writes" AS w USING gone WHERE w."workspace_id" = primitives.current_tenant() AND w.thread_id = gone.thread_id AND w.checkpoint_ns = gone.checkpoint_ns AND w.checkpoint_id = gone.checkpoint_id)
SELECT DISTINCT gone.thread_id, gone.checkpoint_ns FROM gone
$fn$;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_runs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."spectral_checkpoints_delete_runs"(text[]) FROM PUBLIC;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_runs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."spectral_checkpoints_delete_runs"(text[]) TO "primitives_app";

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_blobs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."spectral_checkpoints_delete_blobs"(text[], text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."spectral_checkpoint_blobs" AS b USING unnest($1, $2) AS p(thread_id, checkpoint_ns) WHERE b."workspace_id" = primitives.current_tenant() AND b.thread_id = p.thread_id AND b.checkpoint_ns = p.checkpoint_ns AND NOT EXISTS (SELECT 1 FROM "langgraph"."spectral_checkpoints" AS c WHERE c."workspace_id" = b."workspace_id" AND c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
$fn$;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_blobs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."spectral_checkpoints_delete_blobs"(text[], text[]) FROM PUBLIC;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_delete_blobs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."spectral_checkpoints_delete_blobs"(text[], text[]) TO "primitives_app";

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_prune (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."spectral_checkpoints_prune"(text, text, text, text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."spectral_checkpoint_writes" WHERE "workspace_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
DELETE FROM "langgraph"."spectral_checkpoints" WHERE "workspace_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
UPDATE "langgraph"."spectral_checkpoints" SET parent_checkpoint_id = NULL WHERE "workspace_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY ($4) AND parent_checkpoint_id <> ALL ($4)
$fn$;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_prune: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."spectral_checkpoints_prune"(text, text, text, text[]) FROM PUBLIC;

-- langgraph.spectral_checkpoint_writes: function langgraph.spectral_checkpoints_prune: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."spectral_checkpoints_prune"(text, text, text, text[]) TO "primitives_app";

-- langgraph.spectral_checkpoint_writes: comment
COMMENT ON TABLE "langgraph"."spectral_checkpoint_writes" IS 'LangGraph pending writes of checkpoints of agent ''spectral'', isolated by workspace_id (row-level security).';

-- langgraph.spectral_checkpoint_writes: enable row level security
ALTER TABLE "langgraph"."spectral_checkpoint_writes" ENABLE ROW LEVEL SECURITY;

-- langgraph.spectral_checkpoint_writes: force row level security
ALTER TABLE "langgraph"."spectral_checkpoint_writes" FORCE ROW LEVEL SECURITY;

-- langgraph.spectral_checkpoint_writes: replace policy spectral_tenant_isolation
DROP POLICY IF EXISTS "spectral_tenant_isolation" ON "langgraph"."spectral_checkpoint_writes";

-- langgraph.spectral_checkpoint_writes: policy spectral_tenant_isolation
CREATE POLICY "spectral_tenant_isolation" ON "langgraph"."spectral_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.spectral_checkpoint_writes: replace policy spectral_auditor_read
DROP POLICY IF EXISTS "spectral_auditor_read" ON "langgraph"."spectral_checkpoint_writes";

-- langgraph.spectral_checkpoint_writes: policy spectral_auditor_read
CREATE POLICY "spectral_auditor_read" ON "langgraph"."spectral_checkpoint_writes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.spectral_checkpoint_writes: replace policy spectral_owner_tenant
DROP POLICY IF EXISTS "spectral_owner_tenant" ON "langgraph"."spectral_checkpoint_writes";

-- langgraph.spectral_checkpoint_writes: policy spectral_owner_tenant
CREATE POLICY "spectral_owner_tenant" ON "langgraph"."spectral_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("workspace_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.spectral_checkpoint_writes: replace policy spectral_maintainer
DROP POLICY IF EXISTS "spectral_maintainer" ON "langgraph"."spectral_checkpoint_writes";

-- langgraph.spectral_checkpoint_writes: policy spectral_maintainer
CREATE POLICY "spectral_maintainer" ON "langgraph"."spectral_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.spectral_checkpoint_writes: reset grants
REVOKE ALL ON TABLE "langgraph"."spectral_checkpoint_writes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.spectral_checkpoint_writes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("channel", "type", "blob") ON TABLE "langgraph"."spectral_checkpoint_writes" TO "primitives_app";

-- langgraph.spectral_checkpoint_writes: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."spectral_checkpoint_writes" TO "primitives_auditor";

-- platform.spectral_active_memories: view
CREATE OR REPLACE VIEW "platform"."spectral_active_memories" WITH (security_invoker = true) AS
SELECT "m"."workspace_id",
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
FROM "platform"."spectral_memories" AS m
WHERE "m"."superseded_at" IS NULL AND "m"."invalidated_at" IS NULL AND "m"."archived_at" IS NULL AND "m"."tombstoned_at" IS NULL AND m.erased_at IS NULL
  AND (m.expires_at IS NULL OR m.expires_at > now());

-- platform.spectral_active_memories: comment
COMMENT ON VIEW "platform"."spectral_active_memories" IS 'Memory rows of agent ''spectral'' currently in retrieval (not superseded, invalidated, archived, tombstoned, erased or expired).';

-- platform.spectral_active_memories: reset grants
REVOKE ALL ON TABLE "platform"."spectral_active_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_active_memories: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_active_memories" TO "primitives_app";

-- platform.spectral_active_memories: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_active_memories" TO "primitives_auditor";

-- platform.spectral_audit_lineage: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_lineage" WITH (security_invoker = true) AS
SELECT "e"."workspace_id",
       "e"."memory_id",
       row_number() OVER (PARTITION BY "e"."workspace_id", e.memory_id ORDER BY e.seq) AS "step",
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
FROM "platform"."spectral_memory_events" AS e
LEFT JOIN "platform"."spectral_memories" AS m ON "m"."workspace_id" = "e"."workspace_id" AND "m"."id" = "e"."memory_id"
WHERE e.memory_id IS NOT NULL;

-- platform.spectral_audit_lineage: comment
COMMENT ON VIEW "platform"."spectral_audit_lineage" IS 'Lineage: every journal event of each memory of agent ''spectral'', in order (step 1, 2, ...).';

-- platform.spectral_audit_lineage: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_lineage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_lineage: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_lineage" TO "primitives_app";

-- platform.spectral_audit_lineage: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_lineage" TO "primitives_auditor";

-- platform.spectral_audit_supersession: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_supersession" WITH (security_invoker = true) AS
WITH RECURSIVE chain AS (
    SELECT "m"."workspace_id", m.id AS root_id, m.id AS memory_id, m.superseded_by, 0 AS depth, ARRAY[m.id] AS path
    FROM "platform"."spectral_memories" AS m
    WHERE m.superseded_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM "platform"."spectral_memories" AS p WHERE "p"."workspace_id" = "m"."workspace_id" AND p.superseded_by = m.id)
    UNION ALL
    SELECT "c"."workspace_id", c.root_id, n.id, n.superseded_by, c.depth + 1, c.path || n.id
    FROM chain AS c
    JOIN "platform"."spectral_memories" AS n ON "n"."workspace_id" = "c"."workspace_id" AND "n"."id" = "c"."superseded_by"
    WHERE n.id <> ALL (c.path)
)
SELECT "c"."workspace_id",
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
JOIN "platform"."spectral_memories" AS m ON "m"."workspace_id" = "c"."workspace_id" AND "m"."id" = "c"."memory_id";

-- platform.spectral_audit_supersession: comment
COMMENT ON VIEW "platform"."spectral_audit_supersession" IS 'Supersession chains of agent ''spectral'': root_id is the oldest version, depth counts versions after it, is_latest marks the newest.';

-- platform.spectral_audit_supersession: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_supersession" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_supersession: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_supersession" TO "primitives_app";

-- platform.spectral_audit_supersession: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_supersession" TO "primitives_auditor";

-- platform.spectral_audit_action_basis: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_action_basis" WITH (security_invoker = true) AS
SELECT "l"."workspace_id",
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
FROM "platform"."spectral_action_links" AS l
JOIN "platform"."spectral_memories" AS m ON "m"."workspace_id" = "l"."workspace_id" AND "m"."id" = "l"."memory_id";

-- platform.spectral_audit_action_basis: comment
COMMENT ON VIEW "platform"."spectral_audit_action_basis" IS 'The memory rows each action of agent ''spectral'' relied on, with their state now.';

-- platform.spectral_audit_action_basis: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_action_basis" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_action_basis: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_action_basis" TO "primitives_app";

-- platform.spectral_audit_action_basis: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_action_basis" TO "primitives_auditor";

-- platform.spectral_audit_retention_state: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_retention_state" WITH (security_invoker = true) AS
SELECT "m"."workspace_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."typology",
       "m"."namespace",
       "m"."key",
       "m"."persistent",
       "m"."created_at",
       "m"."last_accessed_at",
       "k"."link_count",
       CASE WHEN m.tombstoned_at IS NOT NULL THEN 'TOMBSTONED' WHEN k.link_count > 0 THEN 'REFERENCED' WHEN m."archived_at" IS NOT NULL OR m."superseded_at" IS NOT NULL OR m."invalidated_at" IS NOT NULL OR (m.persistent AND coalesce(m.last_accessed_at, m.created_at) < now() - '180 days'::interval) THEN 'ORPHANED' ELSE 'ACTIVE' END AS "retention_state"
FROM "platform"."spectral_memories" AS m
CROSS JOIN LATERAL (SELECT count(*) AS link_count FROM "platform"."spectral_action_links" AS l WHERE "m"."workspace_id" = "l"."workspace_id" AND "m"."id" = "l"."memory_id") AS k;

-- platform.spectral_audit_retention_state: comment
COMMENT ON VIEW "platform"."spectral_audit_retention_state" IS 'Retention state of each memory of agent ''spectral'': ACTIVE, REFERENCED, ORPHANED, TOMBSTONED.';

-- platform.spectral_audit_retention_state: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_retention_state" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_retention_state: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_retention_state" TO "primitives_app";

-- platform.spectral_audit_retention_state: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_retention_state" TO "primitives_auditor";

-- platform.spectral_audit_erasures: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_erasures" WITH (security_invoker = true) AS
SELECT "m"."workspace_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."key",
       "m"."erased_at",
       "m"."erasure_reason",
       x.seq AS "erasure_event_seq",
       coalesce(m.content !~ '^sha256:[0-9a-f]{64}$' OR m.value <> '{}'::jsonb OR m.envelope <> '{}'::jsonb OR m.provenance <> '{}'::jsonb OR m.tags <> '{}'::text[] OR m.source IS NOT NULL OR m.embedding IS NOT NULL, false) AS "residue"
FROM "platform"."spectral_memories" AS m
LEFT JOIN LATERAL (SELECT e.seq, e.payload ->> 'subject_sha256' AS subject_sha256 FROM "platform"."spectral_memory_events" AS e WHERE "e"."workspace_id" = "m"."workspace_id" AND e.memory_id = m.id AND e.kind = 'erased' ORDER BY e.seq DESC LIMIT 1) AS x ON true
WHERE m.erased_at IS NOT NULL;

-- platform.spectral_audit_erasures: comment
COMMENT ON VIEW "platform"."spectral_audit_erasures" IS 'Erased memory of agent ''spectral''; residue is true when anything beyond the content hash remains (must always be false).';

-- platform.spectral_audit_erasures: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_erasures" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_erasures: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_erasures" TO "primitives_app";

-- platform.spectral_audit_erasures: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_erasures" TO "primitives_auditor";

-- platform.spectral_audit_sanitization: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_sanitization" WITH (security_invoker = true) AS
SELECT "e"."workspace_id",
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
FROM "platform"."spectral_memory_events" AS e
WHERE e.kind = 'sanitized';

-- platform.spectral_audit_sanitization: comment
COMMENT ON VIEW "platform"."spectral_audit_sanitization" IS 'Memory of agent ''spectral'' that crossed a sanitization gate, from the journal.';

-- platform.spectral_audit_sanitization: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_sanitization" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_sanitization: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_sanitization" TO "primitives_app";

-- platform.spectral_audit_sanitization: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_sanitization" TO "primitives_auditor";

-- platform.spectral_audit_redactions: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_redactions" WITH (security_invoker = true) AS
SELECT "e"."workspace_id",
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
FROM "platform"."spectral_memory_events" AS e
WHERE e.kind IN ('pii_redacted', 'pii_consent', 'pii_raw_read');

-- platform.spectral_audit_redactions: comment
COMMENT ON VIEW "platform"."spectral_audit_redactions" IS 'Personal data of agent ''spectral'' redacted before writes, consents recorded and raw reads by the privacy admin, from the journal (kinds and counts, never a value).';

-- platform.spectral_audit_redactions: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_redactions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_redactions: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_redactions" TO "primitives_app";

-- platform.spectral_audit_redactions: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_redactions" TO "primitives_auditor";

-- platform.spectral_audit_policy_coverage: view
CREATE OR REPLACE VIEW "platform"."spectral_audit_policy_coverage" WITH (security_invoker = true) AS
SELECT "r"."table_schema",
       "r"."table_name",
       c.oid IS NOT NULL AS "present",
       coalesce(c.relrowsecurity, false) AS "rls_enabled",
       coalesce(c.relforcerowsecurity, false) AS "rls_forced",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'spectral_tenant_isolation') AS "tenant_policy",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'spectral_auditor_read') AS "auditor_policy",
       pg_catalog.pg_get_userbyid(c.relowner) AS "owner"
FROM (VALUES ('platform', 'spectral_memories'),
             ('platform', 'spectral_memory_events'),
             ('platform', 'spectral_action_links'),
             ('platform', 'spectral_scopes'),
             ('platform', 'spectral_promotions'),
             ('platform', 'spectral_canonical_refs'),
             ('platform', 'spectral_outbox'),
             ('langgraph', 'spectral_checkpoints'),
             ('langgraph', 'spectral_checkpoint_blobs'),
             ('langgraph', 'spectral_checkpoint_writes')) AS r (table_schema, table_name)
LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = r.table_schema
LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = r.table_name AND c.relkind IN ('r', 'p');

-- platform.spectral_audit_policy_coverage: comment
COMMENT ON VIEW "platform"."spectral_audit_policy_coverage" IS 'Row-level security coverage of every table of agent ''spectral'' (tenant column workspace_id), read from the catalog.';

-- platform.spectral_audit_policy_coverage: reset grants
REVOKE ALL ON TABLE "platform"."spectral_audit_policy_coverage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- platform.spectral_audit_policy_coverage: grants for the app role
GRANT SELECT ON TABLE "platform"."spectral_audit_policy_coverage" TO "primitives_app";

-- platform.spectral_audit_policy_coverage: grants for the auditor role
GRANT SELECT ON TABLE "platform"."spectral_audit_policy_coverage" TO "primitives_auditor";

-- after the plan commits, each in its own transaction (readers and writers are not blocked):

-- platform.spectral_memories: validate the checks against the existing rows
ALTER TABLE "platform"."spectral_memories"
    VALIDATE CONSTRAINT "spectral_memories_bounds_check";

-- platform.spectral_scopes: validate the checks against the existing rows
ALTER TABLE "platform"."spectral_scopes"
    VALIDATE CONSTRAINT "spectral_scopes_tier_check";

-- platform.spectral_canonical_refs: validate the checks against the existing rows
ALTER TABLE "platform"."spectral_canonical_refs"
    VALIDATE CONSTRAINT "spectral_canonical_refs_category_check",
    VALIDATE CONSTRAINT "spectral_canonical_refs_bounds_check";
