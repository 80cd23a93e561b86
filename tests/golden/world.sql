-- primitives plan for agent 'world': 281 statements
-- store worlds.world_agent_*, tenant column world_id; extensions: vector, trigram, btree_gin; leakproof full-text match

-- objects are owned by the owner role
SET LOCAL ROLE "primitives_owner";

-- schema worlds
CREATE SCHEMA IF NOT EXISTS "worlds" AUTHORIZATION "primitives_owner";

-- schema worlds: usage for the runtime roles
GRANT USAGE ON SCHEMA "worlds" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- schema langgraph
CREATE SCHEMA IF NOT EXISTS "langgraph" AUTHORIZATION "primitives_owner";

-- schema langgraph: usage for the runtime roles
GRANT USAGE ON SCHEMA "langgraph" TO "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_memories: table
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_memories" (
    "world_id" text NOT NULL,
    "id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "tier" text NOT NULL,
    "typology" text NOT NULL,
    "persistent" boolean GENERATED ALWAYS AS ("tier" = 'world') STORED,
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
    CONSTRAINT "world_agent_memories_pkey" PRIMARY KEY ("world_id", "id")
);

-- worlds.world_agent_memories: columns added since the table first shipped
ALTER TABLE "worlds"."world_agent_memories" ADD COLUMN IF NOT EXISTS "corroborated_at" timestamptz, ADD COLUMN IF NOT EXISTS "age_ticks" integer, ADD COLUMN IF NOT EXISTS "reference_ticks" integer[];

-- worlds.world_agent_memories: bounds function worlds.world_agent_memories_bounds (its CHECKs, planned once per session)
CREATE OR REPLACE FUNCTION "worlds"."world_agent_memories_bounds"("tier" text, "typology" text, "content" text, "value" jsonb, "envelope" jsonb, "provenance" jsonb, "confidence" real, "erased_at" timestamptz, "erasure_reason" text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $bounds$
BEGIN
    -- every bound at once: one expression, the common case
    IF ((tier IN ('interaction', 'session', 'world'))
        AND ((tier || ':' || typology) = ANY ('{interaction:episodic,session:episodic,world:semantic,world:procedural}'::text[]))
        AND (char_length(content) <= 1000)
        AND (octet_length("value"::text) <= 32768)
        AND (octet_length("envelope"::text) <= 8192)
        AND (octet_length("provenance"::text) <= 32768)
        AND (confidence BETWEEN 0 AND 1)
        AND (erased_at IS NULL OR erasure_reason IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- a bound is broken: fail as its own constraint would
    IF (tier IN ('interaction', 'session', 'world')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_tier_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_tier_check"';
    END IF;
    IF ((tier || ':' || typology) = ANY ('{interaction:episodic,session:episodic,world:semantic,world:procedural}'::text[])) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_typology_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_typology_check"';
    END IF;
    IF (char_length(content) <= 1000) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_content_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_content_check"';
    END IF;
    IF (octet_length("value"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_value_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_value_check"';
    END IF;
    IF (octet_length("envelope"::text) <= 8192) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_envelope_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_envelope_check"';
    END IF;
    IF (octet_length("provenance"::text) <= 32768) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_provenance_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_provenance_check"';
    END IF;
    IF (confidence BETWEEN 0 AND 1) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_confidence_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_confidence_check"';
    END IF;
    IF (erased_at IS NULL OR erasure_reason IS NOT NULL) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'worlds',
            TABLE = 'world_agent_memories', CONSTRAINT = 'world_agent_memories_erasure_check',
            MESSAGE = 'new row for relation "world_agent_memories" violates check constraint "world_agent_memories_erasure_check"';
    END IF;
    RETURN true;
END
$bounds$;

-- worlds.world_agent_memories: bounds function: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) FROM PUBLIC;

-- worlds.world_agent_memories: bounds function: the app role writes the table
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_app";

-- worlds.world_agent_memories: bounds function: the maintainer role writes the table
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_memories_bounds"(text, text, text, jsonb, jsonb, jsonb, real, timestamptz, text) TO "primitives_maintainer";

-- worlds.world_agent_memories: checks (replaced, so they follow the spec)
ALTER TABLE "worlds"."world_agent_memories"
    DROP CONSTRAINT IF EXISTS "world_agent_memories_tier_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_typology_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_content_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_value_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_envelope_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_provenance_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_confidence_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_erasure_check",
    DROP CONSTRAINT IF EXISTS "world_agent_memories_bounds_check",
    ADD CONSTRAINT "world_agent_memories_bounds_check" CHECK ("worlds"."world_agent_memories_bounds"("tier", "typology", "content", "value", "envelope", "provenance", "confidence", "erased_at", "erasure_reason")) NOT VALID;

-- worlds.world_agent_memories: drop index world_agent_memories_envelope_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "worlds"."world_agent_memories_envelope_idx";

-- worlds.world_agent_memories: drop index world_agent_memories_tags_idx (no query can use it under row-level security)
DROP INDEX IF EXISTS "worlds"."world_agent_memories_tags_idx";

-- worlds.world_agent_memories: drop index world_agent_memories_content_trgm_idx (the non-mirror guard compares writes with the canonical text, not with other memories; no query reads this index)
DROP INDEX IF EXISTS "worlds"."world_agent_memories_content_trgm_idx";

-- worlds.world_agent_memories: index world_agent_memories_current_key
CREATE UNIQUE INDEX IF NOT EXISTS "world_agent_memories_current_key" ON "worlds"."world_agent_memories" USING btree ("world_id", "tier", "namespace", "key") WHERE superseded_at IS NULL AND tombstoned_at IS NULL;

-- worlds.world_agent_memories: index world_agent_memories_recent_idx
CREATE INDEX IF NOT EXISTS "world_agent_memories_recent_idx" ON "worlds"."world_agent_memories" USING btree ("world_id", "tier", created_at DESC) WHERE "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- worlds.world_agent_memories: index world_agent_memories_scope_idx
CREATE INDEX IF NOT EXISTS "world_agent_memories_scope_idx" ON "worlds"."world_agent_memories" USING btree ("world_id", "scope_id", "tier") WHERE scope_id IS NOT NULL;

-- worlds.world_agent_memories: index world_agent_memories_superseded_by_idx
CREATE INDEX IF NOT EXISTS "world_agent_memories_superseded_by_idx" ON "worlds"."world_agent_memories" USING btree ("world_id", "superseded_by") WHERE superseded_by IS NOT NULL;

-- worlds.world_agent_memories: index world_agent_memories_expires_idx
CREATE INDEX IF NOT EXISTS "world_agent_memories_expires_idx" ON "worlds"."world_agent_memories" USING btree ("world_id", "expires_at") WHERE expires_at IS NOT NULL;

-- worlds.world_agent_memories: drop index world_agent_memories_tsv_idx (replaced by world_agent_memories_tsv_match_idx)
DROP INDEX IF EXISTS "worlds"."world_agent_memories_tsv_idx";

-- worlds.world_agent_memories: index world_agent_memories_tsv_match_idx
CREATE INDEX IF NOT EXISTS "world_agent_memories_tsv_match_idx" ON "worlds"."world_agent_memories" USING gin ("world_id", tsv primitives.tsvector_match_ops);

-- worlds.world_agent_memories: drop earlier definitions of index world_agent_memories_corroboration_due_5029755a (world_agent_memories_corroboration_due_*)
DO $fn$ DECLARE r record; BEGIN FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass('"worlds"."world_agent_memories"') AND starts_with(c.relname, 'world_agent_memories_corroboration_due_') AND c.relname <> 'world_agent_memories_corroboration_due_5029755a' LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', 'worlds', r.relname); END LOOP; END $fn$;

-- worlds.world_agent_memories: index world_agent_memories_corroboration_due_5029755a
CREATE INDEX IF NOT EXISTS "world_agent_memories_corroboration_due_5029755a" ON "worlds"."world_agent_memories" USING btree ("world_id", ((extract(epoch FROM timezone('UTC', coalesce("corroborated_at", "valid_from"))) + '7776000.0'::numeric * (1 + CASE WHEN jsonb_typeof("provenance" #> '{corroboration,epoch}') = 'number' AND jsonb_typeof("provenance" #> '{corroboration,failed}') = 'number' THEN CASE WHEN ("provenance" #> '{corroboration,epoch}')::numeric = extract(epoch FROM timezone('UTC', coalesce("corroborated_at", "valid_from"))) THEN ("provenance" #> '{corroboration,failed}')::numeric ELSE 0 END ELSE 0 END)))) WHERE "typology" = ANY('{semantic}'::text[]) AND "persistent" AND "decay_rate" IS DISTINCT FROM 0 AND "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- worlds.world_agent_memories: drop earlier definitions of index world_agent_memories_dispositions_baaa1e8a (world_agent_memories_dispositions_*)
DO $fn$ DECLARE r record; BEGIN FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass('"worlds"."world_agent_memories"') AND starts_with(c.relname, 'world_agent_memories_dispositions_') AND c.relname <> 'world_agent_memories_dispositions_baaa1e8a' LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', 'worlds', r.relname); END LOOP; END $fn$;

-- worlds.world_agent_memories: index world_agent_memories_dispositions_baaa1e8a
CREATE INDEX IF NOT EXISTS "world_agent_memories_dispositions_baaa1e8a" ON "worlds"."world_agent_memories" USING btree ("world_id", "typology", "event_time") WHERE "typology" = ANY('{episodic}'::text[]) AND "persistent" AND "decay_rate" IS DISTINCT FROM 0 AND "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- worlds.world_agent_memories: drop earlier definitions of index world_agent_memories_evidence_93838ca5 (world_agent_memories_evidence_*)
DO $fn$ DECLARE r record; BEGIN FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass('"worlds"."world_agent_memories"') AND starts_with(c.relname, 'world_agent_memories_evidence_') AND c.relname <> 'world_agent_memories_evidence_93838ca5' LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', 'worlds', r.relname); END LOOP; END $fn$;

-- worlds.world_agent_memories: index world_agent_memories_evidence_93838ca5
CREATE INDEX IF NOT EXISTS "world_agent_memories_evidence_93838ca5" ON "worlds"."world_agent_memories" USING btree ("world_id", "tier", "typology") WHERE CASE WHEN jsonb_typeof("provenance" -> 'corroborated_by') = 'array' THEN jsonb_array_length("provenance" -> 'corroborated_by') ELSE 0 END >= 3 AND "superseded_at" IS NULL AND "invalidated_at" IS NULL AND "archived_at" IS NULL AND "tombstoned_at" IS NULL;

-- worlds.world_agent_memories: index world_agent_memories_embedding_idx
CREATE INDEX IF NOT EXISTS "world_agent_memories_embedding_idx" ON "worlds"."world_agent_memories" USING hnsw (embedding halfvec_cosine_ops);

-- worlds.world_agent_memories: function worlds.world_agent_delete_transient (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "worlds"."world_agent_delete_transient"(uuid) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "worlds"."world_agent_memories" AS m WHERE m."world_id" = primitives.current_tenant() AND m.id = $1 RETURNING true
$fn$;

-- worlds.world_agent_memories: function worlds.world_agent_delete_transient: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_delete_transient"(uuid) FROM PUBLIC;

-- worlds.world_agent_memories: function worlds.world_agent_delete_transient: callable by the app role
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_delete_transient"(uuid) TO "primitives_app";

-- worlds.world_agent_memories: shingle function worlds.world_agent_shingles
CREATE OR REPLACE FUNCTION "worlds"."world_agent_shingles"(text) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(
        array_agg(DISTINCT hashtext(w.a[i] || ' ' || w.a[i + 1] || ' ' || w.a[i + 2]))
            FILTER (WHERE i IS NOT NULL),
        ARRAY[hashtext(array_to_string(w.a, ' '))])
    FROM (SELECT array_remove(regexp_split_to_array(lower($1), '[^[:alnum:]]+'), '') AS a) AS w
    LEFT JOIN generate_series(1, cardinality(w.a) - 2) AS i ON true
    GROUP BY w.a
$fn$;

-- worlds.world_agent_memories: worlds.world_agent_canonical_indexed: the guard's index of canonical rows (owner only)
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_canonical_indexed" (category text NOT NULL, canonical_key text NOT NULL, row_version text NOT NULL);

-- worlds.world_agent_memories: worlds.world_agent_canonical_indexed: by key
CREATE INDEX IF NOT EXISTS "world_agent_canonical_indexed_key_idx" ON "worlds"."world_agent_canonical_indexed" (category, canonical_key);

-- worlds.world_agent_memories: worlds.world_agent_canonical_postings: the canonical rows' prefix trigrams (owner only)
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_canonical_postings" (category text NOT NULL, shingle integer NOT NULL, canonical_key text NOT NULL);

-- worlds.world_agent_memories: worlds.world_agent_canonical_postings: by shingle
CREATE INDEX IF NOT EXISTS "world_agent_canonical_postings_shingle_idx" ON "worlds"."world_agent_canonical_postings" (category, shingle, canonical_key);

-- worlds.world_agent_memories: words function worlds.world_agent_words
CREATE OR REPLACE FUNCTION "worlds"."world_agent_words"(text) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(array_agg(DISTINCT hashtext(w) ORDER BY hashtext(w)), '{}')
    FROM unnest(regexp_split_to_array(lower($1), '[^[:alnum:]]+')) AS w
    WHERE char_length(w) >= 4
$fn$;

-- worlds.world_agent_memories: worlds.world_agent_canonical_signatures: the canonical rows' word signatures (owner only)
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_canonical_signatures" (category text NOT NULL, word integer NOT NULL, canonical_key text NOT NULL, size integer NOT NULL);

-- worlds.world_agent_memories: worlds.world_agent_canonical_signatures: by word
CREATE INDEX IF NOT EXISTS "world_agent_canonical_signatures_word_idx" ON "worlds"."world_agent_canonical_signatures" (category, word, canonical_key, size);

-- worlds.world_agent_memories: worlds.world_agent_canonical_postings: no access but the owner's functions
REVOKE ALL ON TABLE "worlds"."world_agent_canonical_indexed", "worlds"."world_agent_canonical_postings", "worlds"."world_agent_canonical_signatures" FROM PUBLIC;

-- worlds.world_agent_memories: worlds.canonical_indexed: row-level security forced, the owner's policy only (1)
ALTER TABLE "worlds"."world_agent_canonical_indexed" ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_memories: worlds.canonical_indexed: row-level security forced, the owner's policy only (2)
DROP POLICY IF EXISTS "world_agent_guard_owner" ON "worlds"."world_agent_canonical_indexed";

-- worlds.world_agent_memories: worlds.canonical_indexed: row-level security forced, the owner's policy only (3)
CREATE POLICY "world_agent_guard_owner" ON "worlds"."world_agent_canonical_indexed" FOR ALL TO "primitives_owner" USING (true) WITH CHECK (true);

-- worlds.world_agent_memories: worlds.canonical_postings: row-level security forced, the owner's policy only (1)
ALTER TABLE "worlds"."world_agent_canonical_postings" ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_memories: worlds.canonical_postings: row-level security forced, the owner's policy only (2)
DROP POLICY IF EXISTS "world_agent_guard_owner" ON "worlds"."world_agent_canonical_postings";

-- worlds.world_agent_memories: worlds.canonical_postings: row-level security forced, the owner's policy only (3)
CREATE POLICY "world_agent_guard_owner" ON "worlds"."world_agent_canonical_postings" FOR ALL TO "primitives_owner" USING (true) WITH CHECK (true);

-- worlds.world_agent_memories: worlds.canonical_signatures: row-level security forced, the owner's policy only (1)
ALTER TABLE "worlds"."world_agent_canonical_signatures" ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_memories: worlds.canonical_signatures: row-level security forced, the owner's policy only (2)
DROP POLICY IF EXISTS "world_agent_guard_owner" ON "worlds"."world_agent_canonical_signatures";

-- worlds.world_agent_memories: worlds.canonical_signatures: row-level security forced, the owner's policy only (3)
CREATE POLICY "world_agent_guard_owner" ON "worlds"."world_agent_canonical_signatures" FOR ALL TO "primitives_owner" USING (true) WITH CHECK (true);

-- worlds.world_agent_memories: refresh function world_agent_refresh_canonical_index (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "worlds"."world_agent_refresh_canonical_index"() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    changed bigint := 0;
    n       bigint;
BEGIN
    -- one refresh at a time (migrate and maintain may meet); the tables have no unique key
    -- (they are not tenant tables, and every key of this schema leads with the tenant)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('worlds.world_agent_refresh_canonical_index'));
    IF pg_catalog.to_regclass('worlds.rules') IS NOT NULL THEN
        DELETE FROM "worlds"."world_agent_canonical_indexed" AS x WHERE x.category = 'world_model_rule_content'
           AND NOT EXISTS (SELECT 1 FROM "worlds"."rules" AS c WHERE c."id"::text = x.canonical_key
                           AND c.xmin::text = x.row_version);
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        DELETE FROM "worlds"."world_agent_canonical_postings" AS p WHERE p.category = 'world_model_rule_content'
           AND NOT EXISTS (SELECT 1 FROM "worlds"."world_agent_canonical_indexed" AS x WHERE x.category = 'world_model_rule_content'
                           AND x.canonical_key = p.canonical_key);
        DELETE FROM "worlds"."world_agent_canonical_signatures" AS g WHERE g.category = 'world_model_rule_content'
           AND NOT EXISTS (SELECT 1 FROM "worlds"."world_agent_canonical_indexed" AS x WHERE x.category = 'world_model_rule_content'
                           AND x.canonical_key = g.canonical_key);
        WITH fresh AS (
            SELECT c."id"::text AS k, c.xmin::text AS v, c."body_text" AS body FROM "worlds"."rules" AS c
            WHERE NOT EXISTS (SELECT 1 FROM "worlds"."world_agent_canonical_indexed" AS x WHERE x.category = 'world_model_rule_content'
                              AND x.canonical_key = c."id"::text)),
        indexed AS (
            INSERT INTO "worlds"."world_agent_canonical_indexed" (category, canonical_key, row_version)
            SELECT 'world_model_rule_content', f.k, f.v FROM fresh AS f
            RETURNING 1),
        posted AS (
            INSERT INTO "worlds"."world_agent_canonical_postings" (category, shingle, canonical_key)
            SELECT DISTINCT 'world_model_rule_content', g.h, f.k
            FROM fresh AS f CROSS JOIN LATERAL unnest("worlds"."world_agent_shingles"(f.body)) AS g(h)
            RETURNING 1)
        SELECT count(*) + 0 * (SELECT count(*) FROM posted) INTO n FROM indexed;
        changed := changed + n;
        -- word signatures of the rows without one (those just indexed, and any indexed
        -- before signatures were kept): the rarest words of each among the canonical rows
        IF EXISTS (SELECT 1 FROM "worlds"."rules" AS c
                   WHERE NOT EXISTS (SELECT 1 FROM "worlds"."world_agent_canonical_signatures" AS o
                                     WHERE o.category = 'world_model_rule_content'
                                       AND o.canonical_key = c."id"::text)) THEN
            INSERT INTO "worlds"."world_agent_canonical_signatures" (category, word, canonical_key, size)
            WITH words AS (
                SELECT c."id"::text AS k, w.h,
                       NOT EXISTS (SELECT 1 FROM "worlds"."world_agent_canonical_signatures" AS o
                                   WHERE o.category = 'world_model_rule_content'
                                     AND o.canonical_key = c."id"::text) AS todo
                FROM "worlds"."rules" AS c CROSS JOIN LATERAL unnest("worlds"."world_agent_words"(c."body_text")) AS w(h)),
            df AS (SELECT h, count(*) AS n FROM words GROUP BY h),
            ranked AS (
                SELECT w.k, w.h, row_number() OVER (PARTITION BY w.k ORDER BY d.n, w.h) AS r
                FROM words AS w JOIN df AS d ON d.h = w.h WHERE w.todo)
            SELECT 'world_model_rule_content', r.h, r.k, count(*) OVER (PARTITION BY r.k)
            FROM ranked AS r WHERE r.r <= 8;
        END IF;
    ELSE
        DELETE FROM "worlds"."world_agent_canonical_indexed" AS x WHERE x.category = 'world_model_rule_content';
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        DELETE FROM "worlds"."world_agent_canonical_postings" AS p WHERE p.category = 'world_model_rule_content';
        DELETE FROM "worlds"."world_agent_canonical_signatures" AS g WHERE g.category = 'world_model_rule_content';
    END IF;
    RETURN changed;
END
$fn$;

-- worlds.world_agent_memories: refresh function world_agent_refresh_canonical_index: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_refresh_canonical_index"() FROM PUBLIC;

-- worlds.world_agent_memories: refresh function world_agent_refresh_canonical_index: callable by the maintainer
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_refresh_canonical_index"() TO "primitives_maintainer";

-- worlds.world_agent_memories: worlds.world_agent_canonical_postings: index the canonical rows there are now
SELECT "worlds"."world_agent_refresh_canonical_index"();

-- worlds.world_agent_memories: non-mirror guard worlds.world_agent_non_mirror_guard (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "worlds"."world_agent_non_mirror_guard"() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    hit_key        text;
    hit_similarity real;
    note_shingles  integer[];
    note_words     integer[];
BEGIN
    -- the canonical rows compared: those sharing a word shingle with the note (the postings
    -- index), those whose word signature the words of the note nearly cover (a copy with its
    -- words reordered), and every row not indexed as it is now (new, or changed since the
    -- last refresh: its xmin differs), so a refresh only ever saves work
    note_shingles := "worlds"."world_agent_shingles"(NEW.content);
    note_words := "worlds"."world_agent_words"(NEW.content);
    IF pg_catalog.to_regclass('worlds.rules') IS NOT NULL THEN
        SELECT m.k, m.s INTO hit_key, hit_similarity
        FROM (SELECT d.k, "public".word_similarity(d.body, NEW.content) AS s
              FROM (SELECT c."id"::text AS k, c."body_text" AS body
                    FROM "worlds"."rules" AS c
                    LEFT JOIN "worlds"."world_agent_canonical_indexed" AS x
                      ON x.category = 'world_model_rule_content' AND x.canonical_key = c."id"::text
                     AND x.row_version = c.xmin::text
                    WHERE x.canonical_key IS NULL
                       OR x.canonical_key IN (
                          SELECT p.canonical_key FROM "worlds"."world_agent_canonical_postings" AS p
                          WHERE p.category = 'world_model_rule_content'
                            AND p.shingle = ANY(note_shingles))
                       OR x.canonical_key IN (
                          SELECT g.canonical_key FROM "worlds"."world_agent_canonical_signatures" AS g
                          WHERE g.category = 'world_model_rule_content'
                            AND g.word = ANY(note_words)
                          GROUP BY g.canonical_key, g.size
                          HAVING count(*) >= g.size - g.size / 4)
                    OFFSET 0) AS d) AS m
        WHERE m.s >= 0.6
        ORDER BY m.s DESC, m.k
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION USING
                ERRCODE = 'PM005',
                MESSAGE = format('non-mirror: this write copies canonical text of category '
                                 '%s: row %s of %s is %s similar (threshold %s); write a note '
                                 'that references the row instead of copying it',
                                 'world_model_rule_content', hit_key, 'worlds.rules.body_text',
                                 round(hit_similarity::numeric, 2), 0.6),
                DETAIL = pg_catalog.json_build_object(
                    'category', 'world_model_rule_content', 'canonical_source', 'worlds.rules.body_text',
                    'canonical_key', hit_key,
                    'similarity', round(hit_similarity::numeric, 3),
                    'threshold', 0.6)::text,
                SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME;
        END IF;
    END IF;
    RETURN NEW;
END
$fn$;

-- worlds.world_agent_memories: non-mirror guard worlds.world_agent_non_mirror_guard: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_non_mirror_guard"() FROM PUBLIC;

-- worlds.world_agent_memories: drop trigger primitives_capacity_guard (no tier declares a capacity that refuses)
DROP TRIGGER IF EXISTS "primitives_capacity_guard" ON "worlds"."world_agent_memories";

-- worlds.world_agent_memories: trigger primitives_guard_delete
CREATE OR REPLACE TRIGGER "primitives_guard_delete" BEFORE DELETE ON "worlds"."world_agent_memories" FOR EACH ROW EXECUTE FUNCTION "primitives"."guard_memory_delete"('"worlds"."world_agent_action_links"', 'world_id');

-- worlds.world_agent_memories: trigger primitives_non_mirror_guard
CREATE OR REPLACE TRIGGER "primitives_non_mirror_guard" BEFORE INSERT ON "worlds"."world_agent_memories" FOR EACH ROW EXECUTE FUNCTION "worlds"."world_agent_non_mirror_guard"();

-- worlds.world_agent_memories: comment
COMMENT ON TABLE "worlds"."world_agent_memories" IS 'Memory rows of agent ''world'' (tiers interaction, session, world; persistent tier ''world''), tenant column world_id. Rows leave retrieval by state change (superseded_at, invalidated_at, archived_at, tombstoned_at), never by DELETE of persistent or action-linked rows; every change is journalled in worlds.world_agent_memory_events. Non-mirror categories, held by reference and never copied here: world_model_rule_content, spectral_memory.';

-- worlds.world_agent_memories: enable row level security
ALTER TABLE "worlds"."world_agent_memories" ENABLE ROW LEVEL SECURITY;

-- worlds.world_agent_memories: force row level security
ALTER TABLE "worlds"."world_agent_memories" FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_memories: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "worlds"."world_agent_memories";

-- worlds.world_agent_memories: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "worlds"."world_agent_memories" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_memories: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "worlds"."world_agent_memories";

-- worlds.world_agent_memories: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "worlds"."world_agent_memories" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- worlds.world_agent_memories: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "worlds"."world_agent_memories";

-- worlds.world_agent_memories: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "worlds"."world_agent_memories" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_memories: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "worlds"."world_agent_memories";

-- worlds.world_agent_memories: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "worlds"."world_agent_memories" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- worlds.world_agent_memories: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_memories: grants for the app role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "embedding", "embedding_model", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks") ON TABLE "worlds"."world_agent_memories" TO "primitives_app";

-- worlds.world_agent_memories: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_memories" TO "primitives_auditor";

-- worlds.world_agent_memories: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at", "confidence", "decay_rate", "updated_at", "corroborated_at", "access_count", "last_accessed_at", "embedding", "embedding_model", "provenance", "expires_at", "ttl_ticks", "age_ticks", "reference_ticks"), DELETE ON TABLE "worlds"."world_agent_memories" TO "primitives_maintainer";

-- worlds.world_agent_memory_events: table
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_memory_events" (
    "world_id" text NOT NULL,
    "seq" bigint NOT NULL,
    "event_id" uuid NOT NULL DEFAULT gen_random_uuid(),
    "prev_hash" text NOT NULL,
    "hash" text NOT NULL,
    "kind" text NOT NULL,
    "memory_id" uuid,
    "actor" text,
    "payload" jsonb NOT NULL DEFAULT '{}'::jsonb,
    "occurred_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "world_agent_memory_events_pkey" PRIMARY KEY ("world_id", "seq")
);

-- worlds.world_agent_memory_events: index world_agent_memory_events_event_id_key
CREATE UNIQUE INDEX IF NOT EXISTS "world_agent_memory_events_event_id_key" ON "worlds"."world_agent_memory_events" USING btree ("world_id", "event_id");

-- worlds.world_agent_memory_events: index world_agent_memory_events_memory_idx
CREATE INDEX IF NOT EXISTS "world_agent_memory_events_memory_idx" ON "worlds"."world_agent_memory_events" USING btree ("world_id", "memory_id", "seq") WHERE memory_id IS NOT NULL;

-- worlds.world_agent_memory_events: drop index world_agent_memory_events_kind_idx (replaced by world_agent_memory_events_kind_rare_idx)
DROP INDEX IF EXISTS "worlds"."world_agent_memory_events_kind_idx";

-- worlds.world_agent_memory_events: index world_agent_memory_events_kind_rare_idx
CREATE INDEX IF NOT EXISTS "world_agent_memory_events_kind_rare_idx" ON "worlds"."world_agent_memory_events" USING btree ("world_id", "kind", "seq") WHERE kind <> 'observed';

-- worlds.world_agent_memory_events: chain function worlds.world_agent_chain_event
CREATE OR REPLACE FUNCTION "worlds"."world_agent_chain_event"() RETURNS trigger
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
    IF NEW."world_id" IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'not_null_violation',
            MESSAGE = format('%I.%I: the tenant column %I must be set on every journal event',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME, 'world_id');
    END IF;

    -- One writer per (journal, tenant) at a time, until commit or rollback.
    -- (through primitives.tenant_xact_lock: runtime roles may not take advisory locks)
    PERFORM primitives.tenant_xact_lock(NEW."world_id", 'journal ' || TG_RELID::text);

    SELECT e.seq, e.hash INTO last_seq, last_hash
    FROM "worlds"."world_agent_memory_events" AS e
    WHERE e."world_id" = NEW."world_id"
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

-- worlds.world_agent_memory_events: chain function worlds.world_agent_chain_event: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_chain_event"() FROM PUBLIC;

-- worlds.world_agent_memory_events: function worlds.world_agent_erase_row: the earlier signature dropped
DROP FUNCTION IF EXISTS "worlds"."world_agent_erase_row"(uuid, text, text);

-- worlds.world_agent_memory_events: function worlds.world_agent_erase_row (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "worlds"."world_agent_erase_row"(uuid, text, uuid, text, jsonb) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH erased AS (UPDATE "worlds"."world_agent_memories" AS m SET content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), value = '{}'::jsonb, envelope = '{}'::jsonb, tags = '{}'::text[], provenance = '{}'::jsonb, source = NULL, embedding = NULL, erased_at = now(), erasure_reason = $2, updated_at = now() WHERE m."world_id" = primitives.current_tenant() AND m.id = $1 AND m.erased_at IS NULL RETURNING m.id)
INSERT INTO "worlds"."world_agent_memory_events" ("world_id", event_id, kind, memory_id, actor, payload) SELECT primitives.current_tenant(), $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true
$fn$;

-- worlds.world_agent_memory_events: function worlds.world_agent_erase_row: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_erase_row"(uuid, text, uuid, text, jsonb) FROM PUBLIC;

-- worlds.world_agent_memory_events: function worlds.world_agent_erase_row: callable by the app role
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_erase_row"(uuid, text, uuid, text, jsonb) TO "primitives_app";

-- worlds.world_agent_memory_events: trigger primitives_chain_event
CREATE OR REPLACE TRIGGER "primitives_chain_event" BEFORE INSERT ON "worlds"."world_agent_memory_events" FOR EACH ROW EXECUTE FUNCTION "worlds"."world_agent_chain_event"();

-- worlds.world_agent_memory_events: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "worlds"."world_agent_memory_events" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- worlds.world_agent_memory_events: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "worlds"."world_agent_memory_events" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- worlds.world_agent_memory_events: comment
COMMENT ON TABLE "worlds"."world_agent_memory_events" IS 'Audit journal of agent ''world'': one event per memory change, written in the same transaction. Hash-chained per world_id (seq, prev_hash, hash set by worlds.world_agent_chain_event); UPDATE, DELETE and TRUNCATE are refused.';

-- worlds.world_agent_memory_events: enable row level security
ALTER TABLE "worlds"."world_agent_memory_events" ENABLE ROW LEVEL SECURITY;

-- worlds.world_agent_memory_events: force row level security
ALTER TABLE "worlds"."world_agent_memory_events" FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_memory_events: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "worlds"."world_agent_memory_events";

-- worlds.world_agent_memory_events: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "worlds"."world_agent_memory_events" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_memory_events: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "worlds"."world_agent_memory_events";

-- worlds.world_agent_memory_events: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "worlds"."world_agent_memory_events" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- worlds.world_agent_memory_events: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "worlds"."world_agent_memory_events";

-- worlds.world_agent_memory_events: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "worlds"."world_agent_memory_events" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_memory_events: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "worlds"."world_agent_memory_events";

-- worlds.world_agent_memory_events: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "worlds"."world_agent_memory_events" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- worlds.world_agent_memory_events: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_memory_events" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_memory_events: grants for the app role
GRANT SELECT, INSERT ON TABLE "worlds"."world_agent_memory_events" TO "primitives_app";

-- worlds.world_agent_memory_events: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_memory_events" TO "primitives_auditor";

-- worlds.world_agent_memory_events: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "worlds"."world_agent_memory_events" TO "primitives_maintainer";

-- worlds.world_agent_action_links: table
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_action_links" (
    "world_id" text NOT NULL,
    "action_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "kind" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "world_agent_action_links_pkey" PRIMARY KEY ("world_id", "action_id", "memory_id"),
    CONSTRAINT "world_agent_action_links_memory_fkey" FOREIGN KEY ("world_id", "memory_id") REFERENCES "worlds"."world_agent_memories" ("world_id", "id")
);

-- worlds.world_agent_action_links: index world_agent_action_links_memory_idx
CREATE INDEX IF NOT EXISTS "world_agent_action_links_memory_idx" ON "worlds"."world_agent_action_links" USING btree ("world_id", "memory_id");

-- worlds.world_agent_action_links: trigger primitives_refuse_mutation
CREATE OR REPLACE TRIGGER "primitives_refuse_mutation" BEFORE UPDATE OR DELETE ON "worlds"."world_agent_action_links" FOR EACH ROW EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- worlds.world_agent_action_links: trigger primitives_refuse_truncate
CREATE OR REPLACE TRIGGER "primitives_refuse_truncate" BEFORE TRUNCATE ON "worlds"."world_agent_action_links" FOR EACH STATEMENT EXECUTE FUNCTION "primitives"."refuse_journal_mutation"();

-- worlds.world_agent_action_links: comment
COMMENT ON TABLE "worlds"."world_agent_action_links" IS 'Memory basis of each action of agent ''world''. Append-only; a linked memory row can never be hard-deleted (primitives.guard_memory_delete).';

-- worlds.world_agent_action_links: enable row level security
ALTER TABLE "worlds"."world_agent_action_links" ENABLE ROW LEVEL SECURITY;

-- worlds.world_agent_action_links: force row level security
ALTER TABLE "worlds"."world_agent_action_links" FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_action_links: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "worlds"."world_agent_action_links";

-- worlds.world_agent_action_links: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "worlds"."world_agent_action_links" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_action_links: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "worlds"."world_agent_action_links";

-- worlds.world_agent_action_links: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "worlds"."world_agent_action_links" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- worlds.world_agent_action_links: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "worlds"."world_agent_action_links";

-- worlds.world_agent_action_links: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "worlds"."world_agent_action_links" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_action_links: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "worlds"."world_agent_action_links";

-- worlds.world_agent_action_links: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "worlds"."world_agent_action_links" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- worlds.world_agent_action_links: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_action_links" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_action_links: grants for the app role
GRANT SELECT, INSERT ON TABLE "worlds"."world_agent_action_links" TO "primitives_app";

-- worlds.world_agent_action_links: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_action_links" TO "primitives_auditor";

-- worlds.world_agent_action_links: grants for the maintainer role
GRANT SELECT ON TABLE "worlds"."world_agent_action_links" TO "primitives_maintainer";

-- worlds.world_agent_scopes: table
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_scopes" (
    "world_id" text NOT NULL,
    "tier" text NOT NULL,
    "scope_id" text NOT NULL,
    "opened_at" timestamptz NOT NULL DEFAULT now(),
    "last_activity_at" timestamptz NOT NULL DEFAULT now(),
    "closed_at" timestamptz,
    CONSTRAINT "world_agent_scopes_pkey" PRIMARY KEY ("world_id", "tier", "scope_id")
);

-- worlds.world_agent_scopes: checks (replaced, so they follow the spec)
ALTER TABLE "worlds"."world_agent_scopes"
    DROP CONSTRAINT IF EXISTS "world_agent_scopes_tier_check",
    ADD CONSTRAINT "world_agent_scopes_tier_check" CHECK (tier IN ('interaction', 'session', 'world')) NOT VALID;

-- worlds.world_agent_scopes: index world_agent_scopes_open_idx
CREATE INDEX IF NOT EXISTS "world_agent_scopes_open_idx" ON "worlds"."world_agent_scopes" USING btree ("world_id", "tier", "last_activity_at") WHERE closed_at IS NULL;

-- worlds.world_agent_scopes: comment
COMMENT ON TABLE "worlds"."world_agent_scopes" IS 'Scope instances (runs, sessions, jobs) of agent ''world'' by tier.';

-- worlds.world_agent_scopes: enable row level security
ALTER TABLE "worlds"."world_agent_scopes" ENABLE ROW LEVEL SECURITY;

-- worlds.world_agent_scopes: force row level security
ALTER TABLE "worlds"."world_agent_scopes" FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_scopes: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "worlds"."world_agent_scopes";

-- worlds.world_agent_scopes: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "worlds"."world_agent_scopes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_scopes: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "worlds"."world_agent_scopes";

-- worlds.world_agent_scopes: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "worlds"."world_agent_scopes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- worlds.world_agent_scopes: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "worlds"."world_agent_scopes";

-- worlds.world_agent_scopes: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "worlds"."world_agent_scopes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_scopes: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "worlds"."world_agent_scopes";

-- worlds.world_agent_scopes: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "worlds"."world_agent_scopes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- worlds.world_agent_scopes: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_scopes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_scopes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "worlds"."world_agent_scopes" TO "primitives_app";

-- worlds.world_agent_scopes: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_scopes" TO "primitives_auditor";

-- worlds.world_agent_scopes: grants for the maintainer role
GRANT SELECT, INSERT, UPDATE ("last_activity_at", "closed_at") ON TABLE "worlds"."world_agent_scopes" TO "primitives_maintainer";

-- worlds.world_agent_promotions: table
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_promotions" (
    "world_id" text NOT NULL,
    "rule" text NOT NULL,
    "source_id" uuid NOT NULL,
    "target_id" uuid,
    "promoted_at" timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "world_agent_promotions_pkey" PRIMARY KEY ("world_id", "rule", "source_id")
);

-- worlds.world_agent_promotions: comment
COMMENT ON TABLE "worlds"."world_agent_promotions" IS 'Promotion ledger of agent ''world'': a (rule, source) pair is promoted at most once, so re-running a boundary is harmless.';

-- worlds.world_agent_promotions: enable row level security
ALTER TABLE "worlds"."world_agent_promotions" ENABLE ROW LEVEL SECURITY;

-- worlds.world_agent_promotions: force row level security
ALTER TABLE "worlds"."world_agent_promotions" FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_promotions: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "worlds"."world_agent_promotions";

-- worlds.world_agent_promotions: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "worlds"."world_agent_promotions" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_promotions: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "worlds"."world_agent_promotions";

-- worlds.world_agent_promotions: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "worlds"."world_agent_promotions" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- worlds.world_agent_promotions: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "worlds"."world_agent_promotions";

-- worlds.world_agent_promotions: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "worlds"."world_agent_promotions" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_promotions: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "worlds"."world_agent_promotions";

-- worlds.world_agent_promotions: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "worlds"."world_agent_promotions" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- worlds.world_agent_promotions: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_promotions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_promotions: grants for the app role
GRANT SELECT, INSERT ON TABLE "worlds"."world_agent_promotions" TO "primitives_app";

-- worlds.world_agent_promotions: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_promotions" TO "primitives_auditor";

-- worlds.world_agent_promotions: grants for the maintainer role
GRANT SELECT, INSERT ON TABLE "worlds"."world_agent_promotions" TO "primitives_maintainer";

-- worlds.world_agent_canonical_refs: table
CREATE TABLE IF NOT EXISTS "worlds"."world_agent_canonical_refs" (
    "world_id" text NOT NULL,
    "memory_id" uuid NOT NULL,
    "category" text NOT NULL,
    "canonical_key" text NOT NULL,
    "canonical_version" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now(),
    "actor" text,
    CONSTRAINT "world_agent_canonical_refs_pkey" PRIMARY KEY ("world_id", "memory_id", "category", "canonical_key"),
    CONSTRAINT "world_agent_canonical_refs_memory_fkey" FOREIGN KEY ("world_id", "memory_id") REFERENCES "worlds"."world_agent_memories" ("world_id", "id") ON DELETE CASCADE
);

-- worlds.world_agent_canonical_refs: checks (replaced, so they follow the spec)
ALTER TABLE "worlds"."world_agent_canonical_refs"
    DROP CONSTRAINT IF EXISTS "world_agent_canonical_refs_category_check",
    DROP CONSTRAINT IF EXISTS "world_agent_canonical_refs_bounds_check",
    ADD CONSTRAINT "world_agent_canonical_refs_category_check" CHECK (category IN ('world_model_rule_content', 'spectral_memory')) NOT VALID,
    ADD CONSTRAINT "world_agent_canonical_refs_bounds_check" CHECK (char_length(canonical_key) <= 512 AND char_length(canonical_version) <= 512) NOT VALID;

-- worlds.world_agent_canonical_refs: index world_agent_canonical_refs_key_idx
CREATE INDEX IF NOT EXISTS "world_agent_canonical_refs_key_idx" ON "worlds"."world_agent_canonical_refs" USING btree ("world_id", "category", "canonical_key");

-- worlds.world_agent_canonical_refs: function worlds.world_agent_canonical_version (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "worlds"."world_agent_canonical_version"(text, text[])
RETURNS TABLE (canonical_key text, canonical_version text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF $1 = 'world_model_rule_content' AND pg_catalog.to_regclass('worlds.rules') IS NOT NULL THEN
        RETURN QUERY SELECT c."id"::text, 'sha256:' || pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(c."body_text", 'UTF8')), 'hex') FROM "worlds"."rules" AS c
                     WHERE c."id"::text = ANY ($2);
    END IF;
    RETURN;
END
$fn$;

-- worlds.world_agent_canonical_refs: function worlds.world_agent_canonical_version: not callable by PUBLIC
REVOKE ALL ON FUNCTION "worlds"."world_agent_canonical_version"(text, text[]) FROM PUBLIC;

-- worlds.world_agent_canonical_refs: function worlds.world_agent_canonical_version: callable by primitives_app
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_canonical_version"(text, text[]) TO "primitives_app";

-- worlds.world_agent_canonical_refs: function worlds.world_agent_canonical_version: callable by primitives_maintainer
GRANT EXECUTE ON FUNCTION "worlds"."world_agent_canonical_version"(text, text[]) TO "primitives_maintainer";

-- worlds.world_agent_canonical_refs: comment
COMMENT ON TABLE "worlds"."world_agent_canonical_refs" IS 'References of agent ''world'' memory rows to canonical rows (non-mirror: notes reference canonical text instead of copying it), each pinned to the version it was written against; journalled as canonical_referenced events.';

-- worlds.world_agent_canonical_refs: enable row level security
ALTER TABLE "worlds"."world_agent_canonical_refs" ENABLE ROW LEVEL SECURITY;

-- worlds.world_agent_canonical_refs: force row level security
ALTER TABLE "worlds"."world_agent_canonical_refs" FORCE ROW LEVEL SECURITY;

-- worlds.world_agent_canonical_refs: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "worlds"."world_agent_canonical_refs";

-- worlds.world_agent_canonical_refs: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "worlds"."world_agent_canonical_refs" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_canonical_refs: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "worlds"."world_agent_canonical_refs";

-- worlds.world_agent_canonical_refs: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "worlds"."world_agent_canonical_refs" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- worlds.world_agent_canonical_refs: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "worlds"."world_agent_canonical_refs";

-- worlds.world_agent_canonical_refs: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "worlds"."world_agent_canonical_refs" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- worlds.world_agent_canonical_refs: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "worlds"."world_agent_canonical_refs";

-- worlds.world_agent_canonical_refs: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "worlds"."world_agent_canonical_refs" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- worlds.world_agent_canonical_refs: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_canonical_refs" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_canonical_refs: grants for the app role
GRANT SELECT, INSERT ON TABLE "worlds"."world_agent_canonical_refs" TO "primitives_app";

-- worlds.world_agent_canonical_refs: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_canonical_refs" TO "primitives_auditor";

-- worlds.world_agent_canonical_refs: grants for the maintainer role
GRANT SELECT ON TABLE "worlds"."world_agent_canonical_refs" TO "primitives_maintainer";

-- langgraph.world_agent_checkpoints: table
CREATE TABLE IF NOT EXISTS "langgraph"."world_agent_checkpoints" (
    "world_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "parent_checkpoint_id" text,
    "type" text,
    "checkpoint" jsonb NOT NULL,
    "metadata" jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT "world_agent_checkpoints_pkey" PRIMARY KEY ("world_id", "thread_id", "checkpoint_ns", "checkpoint_id")
);

-- langgraph.world_agent_checkpoints: comment
COMMENT ON TABLE "langgraph"."world_agent_checkpoints" IS 'LangGraph checkpoints (thread state) of agent ''world'', isolated by world_id (row-level security).';

-- langgraph.world_agent_checkpoints: enable row level security
ALTER TABLE "langgraph"."world_agent_checkpoints" ENABLE ROW LEVEL SECURITY;

-- langgraph.world_agent_checkpoints: force row level security
ALTER TABLE "langgraph"."world_agent_checkpoints" FORCE ROW LEVEL SECURITY;

-- langgraph.world_agent_checkpoints: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "langgraph"."world_agent_checkpoints";

-- langgraph.world_agent_checkpoints: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "langgraph"."world_agent_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.world_agent_checkpoints: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "langgraph"."world_agent_checkpoints";

-- langgraph.world_agent_checkpoints: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "langgraph"."world_agent_checkpoints" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.world_agent_checkpoints: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "langgraph"."world_agent_checkpoints";

-- langgraph.world_agent_checkpoints: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "langgraph"."world_agent_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.world_agent_checkpoints: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "langgraph"."world_agent_checkpoints";

-- langgraph.world_agent_checkpoints: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "langgraph"."world_agent_checkpoints" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.world_agent_checkpoints: reset grants
REVOKE ALL ON TABLE "langgraph"."world_agent_checkpoints" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.world_agent_checkpoints: grants for the app role
GRANT SELECT, INSERT, UPDATE ("checkpoint", "metadata") ON TABLE "langgraph"."world_agent_checkpoints" TO "primitives_app";

-- langgraph.world_agent_checkpoints: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."world_agent_checkpoints" TO "primitives_auditor";

-- langgraph.world_agent_checkpoint_blobs: table
CREATE TABLE IF NOT EXISTS "langgraph"."world_agent_checkpoint_blobs" (
    "world_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "channel" text NOT NULL,
    "version" text NOT NULL,
    "type" text NOT NULL,
    "blob" bytea,
    CONSTRAINT "world_agent_checkpoint_blobs_pkey" PRIMARY KEY ("world_id", "thread_id", "checkpoint_ns", "channel", "version")
);

-- langgraph.world_agent_checkpoint_blobs: comment
COMMENT ON TABLE "langgraph"."world_agent_checkpoint_blobs" IS 'LangGraph channel values by version, serialized by the saver, of agent ''world'', isolated by world_id (row-level security).';

-- langgraph.world_agent_checkpoint_blobs: enable row level security
ALTER TABLE "langgraph"."world_agent_checkpoint_blobs" ENABLE ROW LEVEL SECURITY;

-- langgraph.world_agent_checkpoint_blobs: force row level security
ALTER TABLE "langgraph"."world_agent_checkpoint_blobs" FORCE ROW LEVEL SECURITY;

-- langgraph.world_agent_checkpoint_blobs: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "langgraph"."world_agent_checkpoint_blobs";

-- langgraph.world_agent_checkpoint_blobs: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "langgraph"."world_agent_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.world_agent_checkpoint_blobs: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "langgraph"."world_agent_checkpoint_blobs";

-- langgraph.world_agent_checkpoint_blobs: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "langgraph"."world_agent_checkpoint_blobs" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.world_agent_checkpoint_blobs: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "langgraph"."world_agent_checkpoint_blobs";

-- langgraph.world_agent_checkpoint_blobs: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "langgraph"."world_agent_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.world_agent_checkpoint_blobs: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "langgraph"."world_agent_checkpoint_blobs";

-- langgraph.world_agent_checkpoint_blobs: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "langgraph"."world_agent_checkpoint_blobs" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.world_agent_checkpoint_blobs: reset grants
REVOKE ALL ON TABLE "langgraph"."world_agent_checkpoint_blobs" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.world_agent_checkpoint_blobs: grants for the app role
GRANT SELECT, INSERT ON TABLE "langgraph"."world_agent_checkpoint_blobs" TO "primitives_app";

-- langgraph.world_agent_checkpoint_blobs: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."world_agent_checkpoint_blobs" TO "primitives_auditor";

-- langgraph.world_agent_checkpoint_writes: table
CREATE TABLE IF NOT EXISTS "langgraph"."world_agent_checkpoint_writes" (
    "world_id" text NOT NULL,
    "thread_id" text NOT NULL,
    "checkpoint_ns" text NOT NULL DEFAULT '',
    "checkpoint_id" text NOT NULL,
    "task_id" text NOT NULL,
    "task_path" text NOT NULL DEFAULT '',
    "idx" integer NOT NULL,
    "channel" text NOT NULL,
    "type" text,
    "blob" bytea NOT NULL,
    CONSTRAINT "world_agent_checkpoint_writes_pkey" PRIMARY KEY ("world_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
);

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_threads (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."world_agent_checkpoints_delete_threads"(text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."world_agent_checkpoint_writes" WHERE "world_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."world_agent_checkpoint_blobs" WHERE "world_id" = primitives.current_tenant() AND thread_id = ANY ($1);
DELETE FROM "langgraph"."world_agent_checkpoints" WHERE "world_id" = primitives.current_tenant() AND thread_id = ANY ($1)
$fn$;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_threads: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."world_agent_checkpoints_delete_threads"(text[]) FROM PUBLIC;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_threads: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."world_agent_checkpoints_delete_threads"(text[]) TO "primitives_app";

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_runs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."world_agent_checkpoints_delete_runs"(text[]) RETURNS TABLE (thread text, namespace text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
WITH gone AS (DELETE FROM "langgraph"."world_agent_checkpoints" WHERE "world_id" = primitives.current_tenant() AND metadata ->> 'run_id' = ANY ($1) RETURNING thread_id, checkpoint_ns, checkpoint_id),
writes AS (DELETE FROM "langgraph"."world_agent_checkpoint_writes" AS w USING gone WHERE w."world_id" = primitives.current_tenant() AND w.thread_id = gone.thread_id AND w.checkpoint_ns = gone.checkpoint_ns AND w.checkpoint_id = gone.checkpoint_id)
SELECT DISTINCT gone.thread_id, gone.checkpoint_ns FROM gone
$fn$;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_runs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."world_agent_checkpoints_delete_runs"(text[]) FROM PUBLIC;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_runs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."world_agent_checkpoints_delete_runs"(text[]) TO "primitives_app";

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_blobs (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."world_agent_checkpoints_delete_blobs"(text[], text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."world_agent_checkpoint_blobs" AS b USING unnest($1, $2) AS p(thread_id, checkpoint_ns) WHERE b."world_id" = primitives.current_tenant() AND b.thread_id = p.thread_id AND b.checkpoint_ns = p.checkpoint_ns AND NOT EXISTS (SELECT 1 FROM "langgraph"."world_agent_checkpoints" AS c WHERE c."world_id" = b."world_id" AND c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
$fn$;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_blobs: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."world_agent_checkpoints_delete_blobs"(text[], text[]) FROM PUBLIC;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_delete_blobs: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."world_agent_checkpoints_delete_blobs"(text[], text[]) TO "primitives_app";

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_prune (SECURITY DEFINER)
CREATE OR REPLACE FUNCTION "langgraph"."world_agent_checkpoints_prune"(text, text, text, text[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DELETE FROM "langgraph"."world_agent_checkpoint_writes" WHERE "world_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
DELETE FROM "langgraph"."world_agent_checkpoints" WHERE "world_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 AND checkpoint_id <> ALL ($4);
UPDATE "langgraph"."world_agent_checkpoints" SET parent_checkpoint_id = NULL WHERE "world_id" = primitives.current_tenant() AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY ($4) AND parent_checkpoint_id <> ALL ($4)
$fn$;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_prune: not callable by PUBLIC
REVOKE ALL ON FUNCTION "langgraph"."world_agent_checkpoints_prune"(text, text, text, text[]) FROM PUBLIC;

-- langgraph.world_agent_checkpoint_writes: function langgraph.world_agent_checkpoints_prune: callable by the app role
GRANT EXECUTE ON FUNCTION "langgraph"."world_agent_checkpoints_prune"(text, text, text, text[]) TO "primitives_app";

-- langgraph.world_agent_checkpoint_writes: comment
COMMENT ON TABLE "langgraph"."world_agent_checkpoint_writes" IS 'LangGraph pending writes of checkpoints of agent ''world'', isolated by world_id (row-level security).';

-- langgraph.world_agent_checkpoint_writes: enable row level security
ALTER TABLE "langgraph"."world_agent_checkpoint_writes" ENABLE ROW LEVEL SECURITY;

-- langgraph.world_agent_checkpoint_writes: force row level security
ALTER TABLE "langgraph"."world_agent_checkpoint_writes" FORCE ROW LEVEL SECURITY;

-- langgraph.world_agent_checkpoint_writes: replace policy world_agent_tenant_isolation
DROP POLICY IF EXISTS "world_agent_tenant_isolation" ON "langgraph"."world_agent_checkpoint_writes";

-- langgraph.world_agent_checkpoint_writes: policy world_agent_tenant_isolation
CREATE POLICY "world_agent_tenant_isolation" ON "langgraph"."world_agent_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_app" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.world_agent_checkpoint_writes: replace policy world_agent_auditor_read
DROP POLICY IF EXISTS "world_agent_auditor_read" ON "langgraph"."world_agent_checkpoint_writes";

-- langgraph.world_agent_checkpoint_writes: policy world_agent_auditor_read
CREATE POLICY "world_agent_auditor_read" ON "langgraph"."world_agent_checkpoint_writes" AS PERMISSIVE FOR SELECT TO "primitives_auditor" USING (true);

-- langgraph.world_agent_checkpoint_writes: replace policy world_agent_owner_tenant
DROP POLICY IF EXISTS "world_agent_owner_tenant" ON "langgraph"."world_agent_checkpoint_writes";

-- langgraph.world_agent_checkpoint_writes: policy world_agent_owner_tenant
CREATE POLICY "world_agent_owner_tenant" ON "langgraph"."world_agent_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_owner" USING ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), ''))) WITH CHECK ("world_id" = (SELECT nullif(current_setting('primitives.tenant', true), '')));

-- langgraph.world_agent_checkpoint_writes: replace policy world_agent_maintainer
DROP POLICY IF EXISTS "world_agent_maintainer" ON "langgraph"."world_agent_checkpoint_writes";

-- langgraph.world_agent_checkpoint_writes: policy world_agent_maintainer
CREATE POLICY "world_agent_maintainer" ON "langgraph"."world_agent_checkpoint_writes" AS PERMISSIVE FOR ALL TO "primitives_maintainer" USING (true) WITH CHECK (true);

-- langgraph.world_agent_checkpoint_writes: reset grants
REVOKE ALL ON TABLE "langgraph"."world_agent_checkpoint_writes" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- langgraph.world_agent_checkpoint_writes: grants for the app role
GRANT SELECT, INSERT, UPDATE ("channel", "type", "blob") ON TABLE "langgraph"."world_agent_checkpoint_writes" TO "primitives_app";

-- langgraph.world_agent_checkpoint_writes: grants for the auditor role
GRANT SELECT ON TABLE "langgraph"."world_agent_checkpoint_writes" TO "primitives_auditor";

-- worlds.world_agent_memories: drop trigger primitives_publish if an earlier plan published (this spec publishes nothing)
DROP TRIGGER IF EXISTS "primitives_publish" ON "worlds"."world_agent_memories";

-- worlds.world_agent_active_memories: view
CREATE OR REPLACE VIEW "worlds"."world_agent_active_memories" WITH (security_invoker = true) AS
SELECT "m"."world_id",
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
FROM "worlds"."world_agent_memories" AS m
WHERE "m"."superseded_at" IS NULL AND "m"."invalidated_at" IS NULL AND "m"."archived_at" IS NULL AND "m"."tombstoned_at" IS NULL AND m.erased_at IS NULL
  AND (m.expires_at IS NULL OR m.expires_at > now());

-- worlds.world_agent_active_memories: comment
COMMENT ON VIEW "worlds"."world_agent_active_memories" IS 'Memory rows of agent ''world'' currently in retrieval (not superseded, invalidated, archived, tombstoned, erased or expired).';

-- worlds.world_agent_active_memories: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_active_memories" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_active_memories: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_active_memories" TO "primitives_app";

-- worlds.world_agent_active_memories: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_active_memories" TO "primitives_auditor";

-- worlds.world_agent_audit_lineage: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_lineage" WITH (security_invoker = true) AS
SELECT "e"."world_id",
       "e"."memory_id",
       row_number() OVER (PARTITION BY "e"."world_id", e.memory_id ORDER BY e.seq) AS "step",
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
FROM "worlds"."world_agent_memory_events" AS e
LEFT JOIN "worlds"."world_agent_memories" AS m ON "m"."world_id" = "e"."world_id" AND "m"."id" = "e"."memory_id"
WHERE e.memory_id IS NOT NULL;

-- worlds.world_agent_audit_lineage: comment
COMMENT ON VIEW "worlds"."world_agent_audit_lineage" IS 'Lineage: every journal event of each memory of agent ''world'', in order (step 1, 2, ...).';

-- worlds.world_agent_audit_lineage: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_lineage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_lineage: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_lineage" TO "primitives_app";

-- worlds.world_agent_audit_lineage: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_lineage" TO "primitives_auditor";

-- worlds.world_agent_audit_supersession: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_supersession" WITH (security_invoker = true) AS
WITH RECURSIVE chain AS (
    SELECT "m"."world_id", m.id AS root_id, m.id AS memory_id, m.superseded_by, 0 AS depth, ARRAY[m.id] AS path
    FROM "worlds"."world_agent_memories" AS m
    WHERE m.superseded_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM "worlds"."world_agent_memories" AS p WHERE "p"."world_id" = "m"."world_id" AND p.superseded_by = m.id)
    UNION ALL
    SELECT "c"."world_id", c.root_id, n.id, n.superseded_by, c.depth + 1, c.path || n.id
    FROM chain AS c
    JOIN "worlds"."world_agent_memories" AS n ON "n"."world_id" = "c"."world_id" AND "n"."id" = "c"."superseded_by"
    WHERE n.id <> ALL (c.path)
)
SELECT "c"."world_id",
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
JOIN "worlds"."world_agent_memories" AS m ON "m"."world_id" = "c"."world_id" AND "m"."id" = "c"."memory_id";

-- worlds.world_agent_audit_supersession: comment
COMMENT ON VIEW "worlds"."world_agent_audit_supersession" IS 'Supersession chains of agent ''world'': root_id is the oldest version, depth counts versions after it, is_latest marks the newest.';

-- worlds.world_agent_audit_supersession: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_supersession" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_supersession: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_supersession" TO "primitives_app";

-- worlds.world_agent_audit_supersession: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_supersession" TO "primitives_auditor";

-- worlds.world_agent_audit_action_basis: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_action_basis" WITH (security_invoker = true) AS
SELECT "l"."world_id",
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
FROM "worlds"."world_agent_action_links" AS l
JOIN "worlds"."world_agent_memories" AS m ON "m"."world_id" = "l"."world_id" AND "m"."id" = "l"."memory_id";

-- worlds.world_agent_audit_action_basis: comment
COMMENT ON VIEW "worlds"."world_agent_audit_action_basis" IS 'The memory rows each action of agent ''world'' relied on, with their state now.';

-- worlds.world_agent_audit_action_basis: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_action_basis" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_action_basis: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_action_basis" TO "primitives_app";

-- worlds.world_agent_audit_action_basis: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_action_basis" TO "primitives_auditor";

-- worlds.world_agent_audit_retention_state: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_retention_state" WITH (security_invoker = true) AS
SELECT "m"."world_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."typology",
       "m"."namespace",
       "m"."key",
       "m"."persistent",
       "m"."created_at",
       "m"."last_accessed_at",
       "k"."link_count",
       CASE WHEN m.tombstoned_at IS NOT NULL THEN 'TOMBSTONED' WHEN k.link_count > 0 THEN 'REFERENCED' WHEN m."archived_at" IS NOT NULL OR m."superseded_at" IS NOT NULL OR m."invalidated_at" IS NOT NULL OR (m.persistent AND coalesce(m.last_accessed_at, m.created_at) < now() - '365 days'::interval) THEN 'ORPHANED' ELSE 'ACTIVE' END AS "retention_state"
FROM "worlds"."world_agent_memories" AS m
CROSS JOIN LATERAL (SELECT count(*) AS link_count FROM "worlds"."world_agent_action_links" AS l WHERE "m"."world_id" = "l"."world_id" AND "m"."id" = "l"."memory_id") AS k;

-- worlds.world_agent_audit_retention_state: comment
COMMENT ON VIEW "worlds"."world_agent_audit_retention_state" IS 'Retention state of each memory of agent ''world'': ACTIVE, REFERENCED, ORPHANED, TOMBSTONED.';

-- worlds.world_agent_audit_retention_state: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_retention_state" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_retention_state: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_retention_state" TO "primitives_app";

-- worlds.world_agent_audit_retention_state: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_retention_state" TO "primitives_auditor";

-- worlds.world_agent_audit_erasures: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_erasures" WITH (security_invoker = true) AS
SELECT "m"."world_id",
       "m"."id" AS "memory_id",
       "m"."tier",
       "m"."key",
       "m"."erased_at",
       "m"."erasure_reason",
       x.seq AS "erasure_event_seq",
       coalesce(m.content !~ '^sha256:[0-9a-f]{64}$' OR m.value <> '{}'::jsonb OR m.envelope <> '{}'::jsonb OR m.provenance <> '{}'::jsonb OR m.tags <> '{}'::text[] OR m.source IS NOT NULL OR m.embedding IS NOT NULL, false) AS "residue"
FROM "worlds"."world_agent_memories" AS m
LEFT JOIN LATERAL (SELECT e.seq, e.payload ->> 'subject_sha256' AS subject_sha256 FROM "worlds"."world_agent_memory_events" AS e WHERE "e"."world_id" = "m"."world_id" AND e.memory_id = m.id AND e.kind = 'erased' ORDER BY e.seq DESC LIMIT 1) AS x ON true
WHERE m.erased_at IS NOT NULL;

-- worlds.world_agent_audit_erasures: comment
COMMENT ON VIEW "worlds"."world_agent_audit_erasures" IS 'Erased memory of agent ''world''; residue is true when anything beyond the content hash remains (must always be false).';

-- worlds.world_agent_audit_erasures: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_erasures" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_erasures: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_erasures" TO "primitives_app";

-- worlds.world_agent_audit_erasures: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_erasures" TO "primitives_auditor";

-- worlds.world_agent_audit_sanitization: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_sanitization" WITH (security_invoker = true) AS
SELECT "e"."world_id",
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
FROM "worlds"."world_agent_memory_events" AS e
WHERE e.kind = 'sanitized';

-- worlds.world_agent_audit_sanitization: comment
COMMENT ON VIEW "worlds"."world_agent_audit_sanitization" IS 'Memory of agent ''world'' that crossed a sanitization gate, from the journal.';

-- worlds.world_agent_audit_sanitization: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_sanitization" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_sanitization: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_sanitization" TO "primitives_app";

-- worlds.world_agent_audit_sanitization: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_sanitization" TO "primitives_auditor";

-- worlds.world_agent_audit_redactions: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_redactions" WITH (security_invoker = true) AS
SELECT "e"."world_id",
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
FROM "worlds"."world_agent_memory_events" AS e
WHERE e.kind IN ('pii_redacted', 'pii_consent', 'pii_raw_read');

-- worlds.world_agent_audit_redactions: comment
COMMENT ON VIEW "worlds"."world_agent_audit_redactions" IS 'Personal data of agent ''world'' redacted before writes, consents recorded and raw reads by the privacy admin, from the journal (kinds and counts, never a value).';

-- worlds.world_agent_audit_redactions: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_redactions" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_redactions: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_redactions" TO "primitives_app";

-- worlds.world_agent_audit_redactions: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_redactions" TO "primitives_auditor";

-- worlds.world_agent_audit_policy_coverage: view
CREATE OR REPLACE VIEW "worlds"."world_agent_audit_policy_coverage" WITH (security_invoker = true) AS
SELECT "r"."table_schema",
       "r"."table_name",
       c.oid IS NOT NULL AS "present",
       coalesce(c.relrowsecurity, false) AS "rls_enabled",
       coalesce(c.relforcerowsecurity, false) AS "rls_forced",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'world_agent_tenant_isolation') AS "tenant_policy",
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p WHERE p.polrelid = c.oid AND p.polname = 'world_agent_auditor_read') AS "auditor_policy",
       pg_catalog.pg_get_userbyid(c.relowner) AS "owner"
FROM (VALUES ('worlds', 'world_agent_memories'),
             ('worlds', 'world_agent_memory_events'),
             ('worlds', 'world_agent_action_links'),
             ('worlds', 'world_agent_scopes'),
             ('worlds', 'world_agent_promotions'),
             ('worlds', 'world_agent_canonical_refs'),
             ('langgraph', 'world_agent_checkpoints'),
             ('langgraph', 'world_agent_checkpoint_blobs'),
             ('langgraph', 'world_agent_checkpoint_writes')) AS r (table_schema, table_name)
LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = r.table_schema
LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = r.table_name AND c.relkind IN ('r', 'p');

-- worlds.world_agent_audit_policy_coverage: comment
COMMENT ON VIEW "worlds"."world_agent_audit_policy_coverage" IS 'Row-level security coverage of every table of agent ''world'' (tenant column world_id), read from the catalog.';

-- worlds.world_agent_audit_policy_coverage: reset grants
REVOKE ALL ON TABLE "worlds"."world_agent_audit_policy_coverage" FROM "primitives_app", "primitives_auditor", "primitives_maintainer";

-- worlds.world_agent_audit_policy_coverage: grants for the app role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_policy_coverage" TO "primitives_app";

-- worlds.world_agent_audit_policy_coverage: grants for the auditor role
GRANT SELECT ON TABLE "worlds"."world_agent_audit_policy_coverage" TO "primitives_auditor";

-- after the plan commits, each in its own transaction (readers and writers are not blocked):

-- worlds.world_agent_memories: validate the checks against the existing rows
ALTER TABLE "worlds"."world_agent_memories"
    VALIDATE CONSTRAINT "world_agent_memories_bounds_check";

-- worlds.world_agent_scopes: validate the checks against the existing rows
ALTER TABLE "worlds"."world_agent_scopes"
    VALIDATE CONSTRAINT "world_agent_scopes_tier_check";

-- worlds.world_agent_canonical_refs: validate the checks against the existing rows
ALTER TABLE "worlds"."world_agent_canonical_refs"
    VALIDATE CONSTRAINT "world_agent_canonical_refs_category_check",
    VALIDATE CONSTRAINT "world_agent_canonical_refs_bounds_check";
