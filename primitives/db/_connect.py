"""Opening a connection that fails fast and says why.

Every connection the framework opens for a role goes through :func:`connect_args`
(a ``connect_timeout`` unless the DSN sets one) and, on failure, through
:func:`connect_failure`, which names the cause (authentication failed, no password
given, no such role, no such database, server not reachable, no answer in time) and
what to do about it, keeping the server's own words after it.

Example::

    try:
        conn = psycopg.connect(with_timeout(dsn))
    except psycopg.OperationalError as err:
        raise StorageError(connect_failure(err, dsn, "the application role")) from err
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = ["CONNECT_TIMEOUT_S", "connect_failure", "with_timeout"]

CONNECT_TIMEOUT_S = 2
"""Seconds a connection attempt may take before it is reported (libpq's minimum is 2);
a DSN's own ``connect_timeout`` wins."""

_ROLE_DSN_HINT = ("give the role a password (as an admin: ALTER ROLE {user} PASSWORD '...') "
                  "and pass its connection string in PRIMITIVES_APP_DSN, PRIMITIVES_AUDITOR_DSN "
                  "or PRIMITIVES_PRIVACY_ADMIN_DSN")


def with_timeout(dsn: str) -> str:
    """``dsn`` with ``connect_timeout`` set to :data:`CONNECT_TIMEOUT_S` unless it has one."""
    if "connect_timeout" in conninfo_to_dict(dsn):
        return dsn
    return make_conninfo(dsn, connect_timeout=str(CONNECT_TIMEOUT_S))


def _where(dsn: str) -> tuple[str, str]:
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "?", "?"
    host = str(params.get("host") or params.get("hostaddr") or "the local socket")
    port = str(params.get("port") or "5432")
    return str(params.get("user") or "the current user"), f"{host}:{port}"


def connect_failure(err: psycopg.Error, dsn: str, who: str) -> str:
    """A one-line explanation of why ``who`` (e.g. ``"the application role"``) could not
    connect with ``dsn``: the cause first, the way forward, then the server's words."""
    user, where = _where(dsn)
    text = str(err).strip()
    detail = " ".join(text.split())
    lowered = text.lower()
    sqlstate = getattr(err, "sqlstate", None)
    if "no password supplied" in lowered:
        cause = (f"the server asks for a password and none was given for {user}: "
                 + _ROLE_DSN_HINT.format(user=user))
    elif sqlstate == "28P01" or "password authentication failed" in lowered:
        cause = (f"authentication failed for {user}: the password is wrong or the role has "
                 "none; " + _ROLE_DSN_HINT.format(user=user))
    elif "role" in lowered and "does not exist" in lowered:
        cause = (f"no such role {user} on {where}: run `primitives migrate` (it creates the "
                 "runtime roles) against this server, or fix the DSN's user")
    elif sqlstate == "3D000" or ("database" in lowered and "does not exist" in lowered):
        cause = f"no such database on {where}: create it or fix the DSN's dbname"
    elif "no pg_hba.conf entry" in lowered:
        cause = (f"the server's pg_hba.conf has no entry for {user} from this host: add one "
                 "(e.g. scram-sha-256) and reload the server")
    elif "timeout expired" in lowered:
        cause = (f"server at {where} did not answer within the connect timeout "
                 f"({CONNECT_TIMEOUT_S} s unless the DSN sets connect_timeout)")
    elif ("connection refused" in lowered or "no such file or directory" in lowered
          or "could not translate host name" in lowered or "network is unreachable" in lowered
          or "no route to host" in lowered):
        cause = f"server not reachable at {where}: is it running and listening there?"
    else:
        cause = f"connection to {where} failed"
    return f"cannot connect as {who}: {cause} ({detail})"
