"""tests/security/test_bad_input.py on the Citus cluster: the same tests, ``pg`` the coordinator
(tests/citus/conftest.py; what cannot pass there is listed in its ``ON_CLUSTER_XFAIL``)."""

from tests.security.test_bad_input import *  # noqa: F403
