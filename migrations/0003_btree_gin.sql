-- 0003: btree_gin, so GIN indexes (full text, envelope, tags) can lead with the tenant column.
-- Only where the server has it; without it the indexes are built on the indexed column alone.
DO $extensions$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'btree_gin') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS btree_gin;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'btree_gin is available but % may not create it; ask a superuser to run '
                          'CREATE EXTENSION btree_gin', current_user;
        END;
    ELSE
        RAISE NOTICE 'btree_gin is not available on this server; GIN indexes will not lead with the tenant';
    END IF;
END
$extensions$;

SET LOCAL ROLE primitives_owner;

CREATE OR REPLACE VIEW primitives.capabilities WITH (security_invoker = true) AS
SELECT c.name,
       c.feature,
       x.extversion IS NOT NULL AS installed,
       x.extversion             AS version,
       n.nspname                AS schema
FROM (VALUES ('vector',    'semantic retrieval over embeddings (pgvector)'),
             ('pg_trgm',   'trigram text similarity'),
             ('btree_gin', 'GIN indexes that lead with the tenant column')) AS c(name, feature)
LEFT JOIN pg_catalog.pg_extension x ON x.extname = c.name
LEFT JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace;
