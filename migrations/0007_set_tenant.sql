-- 0007: primitives.set_tenant(text), the one statement every tenant transaction opens with.
--
-- On a single node it is set_config('primitives.tenant', $1, true) under a name of its own
-- (a SQL function of one expression, which the planner inlines). A Citus coordinator
-- forwards SET LOCAL to its workers but not a set_config call, so `primitives migrate` on a
-- coordinator replaces the body with one that runs SET LOCAL: the runtime's statement text
-- stays the same everywhere, and the tenant stays a bound value in it.

SET LOCAL ROLE primitives_owner;

CREATE OR REPLACE FUNCTION primitives.set_tenant(tenant text) RETURNS text
LANGUAGE sql VOLATILE
AS $$ SELECT pg_catalog.set_config('primitives.tenant', tenant, true) $$;

COMMENT ON FUNCTION primitives.set_tenant(text) IS
    'Sets the transaction''s tenant (primitives.tenant, local to the transaction).';

GRANT EXECUTE ON FUNCTION primitives.set_tenant(text)
    TO primitives_app, primitives_auditor, primitives_maintainer;
