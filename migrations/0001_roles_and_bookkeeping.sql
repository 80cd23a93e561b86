-- 0001: the three roles, the `primitives` schema, bookkeeping and capabilities.
--
-- Runs as the admin connection (a superuser, or a role with CREATEROLE that may
-- create extensions). The migrations runner has already created the schema and
-- primitives.schema_migrations (it needs them to record this very migration);
-- here they are handed to the owner role.
--
-- Roles are cluster-wide, so they are created only when missing, and a second
-- database on the same cluster (or a concurrent migrator) finds them in place.

DO $roles$
BEGIN
    BEGIN
        CREATE ROLE primitives_owner NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;  -- already there (created by another database or migrator)
    END;
    BEGIN
        CREATE ROLE primitives_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;
    END;
    BEGIN
        CREATE ROLE primitives_auditor LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;
    END;

    -- A pre-existing runtime role must not be able to bypass row-level security.
    -- ALTER only when something is off: changing BYPASSRLS needs a superuser.
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles
        WHERE rolname IN ('primitives_app', 'primitives_auditor')
          AND (rolsuper OR rolbypassrls OR rolcreatedb OR rolcreaterole OR NOT rolcanlogin)
    ) THEN
        ALTER ROLE primitives_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
        ALTER ROLE primitives_auditor LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;

    -- The admin runs `SET ROLE primitives_owner` before creating agent objects.
    -- A superuser may do so without membership.
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT primitives_owner TO %I', current_user);
    END IF;

    -- The owner creates one schema per agent; the runtime roles only connect.
    EXECUTE format('GRANT CONNECT, CREATE, TEMPORARY ON DATABASE %I TO primitives_owner',
                   current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO primitives_app, primitives_auditor',
                   current_database());
END
$roles$;

-- Extensions, only where the server has them. Without pgvector the framework
-- still runs (semantic retrieval is dropped); primitives.capabilities says which.
DO $extensions$
DECLARE
    ext text;
BEGIN
    FOREACH ext IN ARRAY ARRAY['vector', 'pg_trgm'] LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = ext) THEN
            BEGIN
                EXECUTE format('CREATE EXTENSION IF NOT EXISTS %I', ext);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE WARNING 'extension % is available but % may not create it; '
                              'ask a superuser to run CREATE EXTENSION %', ext, current_user, ext;
            END;
        ELSE
            RAISE NOTICE 'extension % is not available on this server; features that need it are off', ext;
        END IF;
    END LOOP;
END
$extensions$;

ALTER SCHEMA primitives OWNER TO primitives_owner;
ALTER TABLE primitives.schema_migrations OWNER TO primitives_owner;
REVOKE ALL ON SCHEMA primitives FROM PUBLIC;
GRANT USAGE ON SCHEMA primitives TO primitives_app, primitives_auditor;

-- Everything below is created by, and owned by, the owner role.
SET LOCAL ROLE primitives_owner;

-- Functions the owner creates are executable only where granted (each migration
-- and plan grants them one by one). Not `IN SCHEMA`: a per-schema default cannot
-- take away the global EXECUTE-to-PUBLIC default.
ALTER DEFAULT PRIVILEGES FOR ROLE primitives_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- One row per agent whose compiled plan (DDL) is applied; see apply_plan().
CREATE TABLE primitives.agent_plans (
    agent           text PRIMARY KEY,
    checksum        text NOT NULL,
    applied_at      timestamptz NOT NULL DEFAULT now(),
    statement_count integer NOT NULL
);

-- What this server can do. Read live from the catalog, so installing pgvector
-- later (and running CREATE EXTENSION) is picked up without a migration.
CREATE VIEW primitives.capabilities WITH (security_invoker = true) AS
SELECT c.name,
       c.feature,
       x.extversion IS NOT NULL AS installed,
       x.extversion             AS version,
       n.nspname                AS schema
FROM (VALUES ('vector',  'semantic retrieval over embeddings (pgvector)'),
             ('pg_trgm', 'trigram text similarity')) AS c(name, feature)
LEFT JOIN pg_catalog.pg_extension x ON x.extname = c.name
LEFT JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace;

CREATE FUNCTION primitives.has_capability(extension_name text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = $1) $$;

COMMENT ON FUNCTION primitives.has_capability(text) IS
    'True when the named extension (vector, pg_trgm) is installed in this database.';

GRANT SELECT ON primitives.capabilities TO primitives_app, primitives_auditor;
GRANT EXECUTE ON FUNCTION primitives.has_capability(text) TO primitives_app, primitives_auditor;
