-- 0008: what each applied agent plan was, not only its checksum.
--
-- primitives.agent_plans gains the shape of the spec it applied (store, tiers, persistent
-- tier, anchor keys, embedding dims, audit retention): `primitives plan` compares the next
-- spec with it, so a rename, a move or a weakening is classified instead of re-run blindly.
-- primitives.plan_history is the append-only journal of every applied plan: its changes,
-- the kinds an operator allowed (`--allow KIND`) and the reason given, for the auditor.

SET LOCAL ROLE primitives_owner;

ALTER TABLE primitives.agent_plans ADD COLUMN shape jsonb;

CREATE TABLE primitives.plan_history (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent       text NOT NULL,
    checksum    text NOT NULL,
    shape       jsonb NOT NULL,
    changes     jsonb NOT NULL DEFAULT '[]',
    allowed     text[] NOT NULL DEFAULT '{}',
    reason      text,
    applied_by  text NOT NULL DEFAULT session_user,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (cardinality(allowed) = 0 OR length(btrim(reason)) > 0)
);

CREATE TRIGGER primitives_refuse_mutation
    BEFORE UPDATE OR DELETE ON primitives.plan_history
    FOR EACH ROW EXECUTE FUNCTION primitives.refuse_journal_mutation();
CREATE TRIGGER primitives_refuse_truncate
    BEFORE TRUNCATE ON primitives.plan_history
    FOR EACH STATEMENT EXECUTE FUNCTION primitives.refuse_journal_mutation();

COMMENT ON TABLE primitives.plan_history IS
    'Append-only: each applied agent plan, its classified changes, the kinds allowed and why.';

GRANT SELECT ON primitives.plan_history TO primitives_auditor;
