-- 0009: when `primitives maintain` last ran each scheduled pass.
--
-- A typology's decay may carry a cron schedule (behavior.decay.<typology>.schedule): maintain
-- runs its decay passes only when the schedule fired since their last complete run over all
-- of the agent's tenants, which it records here (one row per agent, job and typology).

SET LOCAL ROLE primitives_owner;

CREATE TABLE primitives.maintenance_runs (
    agent        text NOT NULL,
    job          text NOT NULL,
    typology     text NOT NULL,
    schedule     text NOT NULL,
    last_run_at  timestamptz NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, job, typology)
);

COMMENT ON TABLE primitives.maintenance_runs IS
    'When primitives maintain last completed each scheduled job (decay) per agent and typology.';

GRANT SELECT, INSERT, UPDATE ON primitives.maintenance_runs TO primitives_maintainer;
GRANT SELECT ON primitives.maintenance_runs TO primitives_auditor;
