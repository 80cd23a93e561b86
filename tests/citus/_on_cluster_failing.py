"""The exact tests (of tests/citus/test_on_cluster_*.py) that fail on the cluster, each
with its reason in ``conftest.ON_CLUSTER_XFAIL`` (by test function). Listed from a run of
the suite on the cluster; a listed test that passes fails the run (``strict``)."""

ON_CLUSTER_FAILING: frozenset[str] = frozenset()
