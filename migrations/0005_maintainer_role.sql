-- 0005: the maintainer role, which `primitives maintain` runs as.
--
-- The periodic lifecycle job (decay, idle scope closes, promotion) works set-based across a
-- batch of tenants, which the runtime roles cannot: their row-level security policies see one
-- tenant per transaction. primitives_maintainer is NOLOGIN: the admin connection that runs
-- migrations takes it with SET ROLE. Every agent plan gives it a policy that sees all tenants
-- and only the table privileges maintenance needs; no runtime role is a member of it.

DO $roles$
BEGIN
    BEGIN
        CREATE ROLE primitives_maintainer NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB
            NOCREATEROLE NOINHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;
    END;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'primitives_maintainer'
               AND (rolsuper OR rolbypassrls OR rolcanlogin OR rolcreatedb OR rolcreaterole)) THEN
        ALTER ROLE primitives_maintainer NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB
            NOCREATEROLE;
    END IF;
    -- The admin runs `SET ROLE primitives_maintainer`; a superuser may without membership.
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT primitives_maintainer TO %I', current_user);
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO primitives_maintainer', current_database());
END
$roles$;

GRANT USAGE ON SCHEMA primitives TO primitives_maintainer;
GRANT EXECUTE ON FUNCTION
    primitives.current_tenant(),
    primitives.event_hash(text, bigint, text, uuid, text, jsonb, timestamptz)
TO primitives_maintainer;
GRANT SELECT ON primitives.capabilities TO primitives_maintainer;

SET LOCAL ROLE primitives_owner;

-- The journal's chain trigger locks (tenant, journal) through this function. A maintenance
-- transaction appends events for many tenants, so a session whose user may become the
-- maintainer may lock any tenant; every other caller, only the tenant of its transaction.
CREATE OR REPLACE FUNCTION primitives.tenant_xact_lock(tenant text, scope text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF tenant IS DISTINCT FROM primitives.current_tenant()
       AND NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r
                         WHERE r.rolname = session_user), false)
       AND NOT pg_catalog.pg_has_role(session_user, 'primitives_maintainer', 'MEMBER') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'a lock may be taken only for the tenant of the current transaction',
            HINT    = 'SET LOCAL primitives.tenant to the tenant first.';
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(
        ('x' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
            pg_catalog.jsonb_build_array(tenant, scope)::text, 'UTF8')), 'hex'), 16))::bit(64)::bigint);
END
$fn$;

REVOKE ALL ON FUNCTION primitives.tenant_xact_lock(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION primitives.tenant_xact_lock(text, text)
    TO primitives_app, primitives_maintainer;
