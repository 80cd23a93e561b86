"""The package's one public surface is pinned: adding or removing a name is a decision."""

from __future__ import annotations

import primitives
import primitives.errors

EXPECTED = {
    "AgentSpec", "AsyncEngine", "Capabilities", "Engine", "GovernanceError", "Hit", "Memory",
    "MemoryWriteFail", "MigrateReport", "MigrationError", "ModelMismatch", "Plan",
    "PolicyNotFound", "PolicyViolation", "PrimitivesError", "ServerError", "SpecError",
    "StorageError", "StorageFull", "TenancyError", "__version__", "compile_plan", "load_spec",
    "load_specs", "migrate",
}


def test_public_names_are_exactly_the_pinned_set() -> None:
    assert set(primitives.__all__) == EXPECTED
    for name in primitives.__all__:
        assert hasattr(primitives, name), name


def test_every_error_derives_from_the_one_base_and_has_a_code() -> None:
    codes = set()
    for name in primitives.errors.__all__:
        cls = getattr(primitives.errors, name)
        assert issubclass(cls, primitives.PrimitivesError)
        codes.add(cls.code)
    assert len(codes) == len(primitives.errors.__all__)  # each failure has its own code
    assert not issubclass(primitives.PrimitivesError, MemoryError)


def test_error_envelope_carries_code_message_and_context() -> None:
    err = primitives.MemoryWriteFail("write failed", attempts=2)
    assert err.envelope() == {
        "error": "MEMORY_WRITE_FAIL", "message": "write failed", "attempts": 2,
        "user_message": "I tried to save that but my memory failed. I might not remember "
                        "this next time."}
