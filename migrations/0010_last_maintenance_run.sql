-- 0010: the last complete decay pass, for memory_stats, without exposing maintenance_runs.
--
-- `primitives maintain` now records every decay pass it completes over all of an agent's
-- tenants in primitives.maintenance_runs, scheduled or not (an unscheduled typology's row has
-- no schedule). The runtime role reads none of that table: primitives.last_maintenance_run
-- (SECURITY DEFINER) returns only the latest run time of one agent's job, which is the same
-- for every tenant of the agent and says nothing about any tenant.

SET LOCAL ROLE primitives_owner;

ALTER TABLE primitives.maintenance_runs ALTER COLUMN schedule DROP NOT NULL;

COMMENT ON TABLE primitives.maintenance_runs IS
    'When primitives maintain last completed each decay pass per agent and typology '
    '(schedule: the typology''s cron schedule, NULL when it runs every time).';

CREATE FUNCTION primitives.last_maintenance_run(agent text, job text) RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT max(r.last_run_at) FROM primitives.maintenance_runs AS r
    WHERE r.agent = last_maintenance_run.agent AND r.job = last_maintenance_run.job
$$;

COMMENT ON FUNCTION primitives.last_maintenance_run(text, text) IS
    'When maintain last completed a pass of job (decay) for agent over all its tenants; '
    'NULL if never (SECURITY DEFINER: the runtime role reads no other column).';

GRANT EXECUTE ON FUNCTION primitives.last_maintenance_run(text, text)
    TO primitives_app, primitives_auditor, primitives_maintainer;
