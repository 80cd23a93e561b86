-- The memories table and the journal without row-level security: an upper bound on what the
-- policies cost a write. Measurement only: tenancy rests on them.
ALTER TABLE {schema}.{variant}_memories NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
ALTER TABLE {schema}.{variant}_memory_events NO FORCE ROW LEVEL SECURITY,
    DISABLE ROW LEVEL SECURITY;
