-- The memories table's bounds as eight CHECK constraints, the form plans made before the
-- bounds function (one constraint calling <prefix>_memories_bounds): what the function saves.
ALTER TABLE {schema}.{variant}_memories
    DROP CONSTRAINT {variant}_memories_bounds_check,
    ADD CONSTRAINT {variant}_memories_tier_check CHECK (tier IN ('cycle', 'run', 'workspace')),
    ADD CONSTRAINT {variant}_memories_typology_check CHECK ((tier || ':' || typology) = ANY (
        '{cycle:episodic,run:episodic,workspace:episodic,workspace:semantic,workspace:procedural}'::text[])),
    ADD CONSTRAINT {variant}_memories_content_check CHECK (char_length(content) <= 4000),
    ADD CONSTRAINT {variant}_memories_value_check CHECK (octet_length("value"::text) <= 32768),
    ADD CONSTRAINT {variant}_memories_envelope_check CHECK (octet_length("envelope"::text) <= 8192),
    ADD CONSTRAINT {variant}_memories_provenance_check
        CHECK (octet_length("provenance"::text) <= 32768),
    ADD CONSTRAINT {variant}_memories_confidence_check CHECK (confidence BETWEEN 0 AND 1),
    ADD CONSTRAINT {variant}_memories_erasure_check
        CHECK (erased_at IS NULL OR erasure_reason IS NOT NULL);
