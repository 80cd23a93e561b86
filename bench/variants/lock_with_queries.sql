-- The chain trigger taking its per-tenant lock through a copy of primitives.tenant_xact_lock as
-- migration 0005 wrote it (the check one IF with a subquery, the lock a PERFORM: two queries
-- per call), in place of migration 0011's form (no query on the caller's own tenant): what
-- 0011 saves a write. The copy is the variant's own function, so the base copy keeps 0011's.
CREATE FUNCTION {schema}.{variant}_lock_with_queries(tenant text, scope text) RETURNS void
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
REVOKE ALL ON FUNCTION {schema}.{variant}_lock_with_queries(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {schema}.{variant}_lock_with_queries(text, text)
    TO primitives_app, primitives_maintainer;
DO $$
DECLARE
    body text := pg_catalog.pg_get_functiondef('{schema}.{variant}_chain_event'::regproc);
BEGIN
    IF pg_catalog.strpos(body, 'PERFORM primitives.tenant_xact_lock(') = 0 THEN
        RAISE EXCEPTION 'the chain trigger no longer takes the lock as this variant expects';
    END IF;
    EXECUTE pg_catalog.replace(body, 'PERFORM primitives.tenant_xact_lock(',
                               'PERFORM {schema}.{variant}_lock_with_queries(');
END $$;
