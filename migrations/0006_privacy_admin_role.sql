-- 0006: the privacy admin role, the only role that reads raw personal data.
--
-- A PII policy with raw_with_consent keeps the raw text of values it redacts (when the write
-- names a logged consent event) in a per-agent table no runtime role can SELECT. Each agent
-- plan creates a SECURITY DEFINER function that returns one row of it and journals the read;
-- EXECUTE on it goes to primitives_privacy_admin alone. The role logs in like the app role
-- and is a member of it (it runs the engine as the app role does), nothing more: no
-- superuser, no BYPASSRLS, so row-level security still confines it to one tenant per
-- transaction.

DO $roles$
BEGIN
    BEGIN
        CREATE ROLE primitives_privacy_admin LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB
            NOCREATEROLE INHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;
    END;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'primitives_privacy_admin'
               AND (rolsuper OR rolbypassrls OR rolcreatedb OR rolcreaterole)) THEN
        ALTER ROLE primitives_privacy_admin NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO primitives_privacy_admin',
                   current_database());
END
$roles$;

GRANT primitives_app TO primitives_privacy_admin;
