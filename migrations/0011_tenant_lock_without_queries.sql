-- 0011: primitives.tenant_xact_lock without queries on its common path.
--
-- Every journal event takes this lock (the chain trigger), so a store update with three events
-- takes it three times. In 0005's form its check was one IF whose condition held a subquery,
-- and the lock a PERFORM: PL/pgSQL ran both as queries, each with its own executor start and
-- end, on every call. Here the common case, the transaction's own tenant, is decided by one
-- simple expression (the subquery runs only for another tenant's lock), and the lock is taken
-- by an assignment. The same check, message, SQLSTATE, hint and lock key as 0005.

SET LOCAL ROLE primitives_owner;

CREATE OR REPLACE FUNCTION primitives.tenant_xact_lock(tenant text, scope text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    taken boolean;
BEGIN
    -- Runs as the owner, which may take advisory locks where the runtime roles may not: so
    -- the caller may lock only inside its own tenant, unless it may become the maintainer
    -- (whose passes span tenants). A superuser could take the lock anyway.
    IF tenant IS DISTINCT FROM primitives.current_tenant() THEN
        IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r
                         WHERE r.rolname = session_user), false)
           AND NOT pg_catalog.pg_has_role(session_user, 'primitives_maintainer', 'MEMBER') THEN
            RAISE EXCEPTION USING
                ERRCODE = 'insufficient_privilege',
                MESSAGE = 'a lock may be taken only for the tenant of the current transaction',
                HINT    = 'SET LOCAL primitives.tenant to the tenant first.';
        END IF;
    END IF;
    -- sha256, not hashtextextended: a 64-bit key that no one can aim at another key by
    -- choosing the text; the JSON array keeps (tenant, scope) pairs apart. An assignment
    -- (the function returns void, never NULL), not PERFORM, which would run a query.
    taken := pg_catalog.pg_advisory_xact_lock(
        ('x' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
            pg_catalog.jsonb_build_array(tenant, scope)::text, 'UTF8')), 'hex'), 16))::bit(64)::bigint
    ) IS NULL;
END
$fn$;
