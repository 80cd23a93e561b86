"""tests/security/test_tenant_isolation.py on the Citus cluster: the same tests, ``pg`` the coordinator
(tests/citus/conftest.py; what cannot pass there is listed in its ``ON_CLUSTER_XFAIL``)."""

from tests.security.test_tenant_isolation import *  # noqa: F403
