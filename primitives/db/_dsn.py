"""Where the database is: ``PRIMITIVES_DSN``, or the embedded server started on demand.

Three DSNs, one per role (DESIGN §5): the admin DSN runs migrations and plans;
the app DSN is what every runtime path uses; the auditor DSN reads audit views.

Example::

    admin = resolve_dsn()       # PRIMITIVES_DSN, else the embedded server's superuser
    runtime = app_dsn(admin)    # PRIMITIVES_APP_DSN, else `admin` as primitives_app
"""

from __future__ import annotations

import os

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives.db._names import APP_ROLE, AUDITOR_ROLE, PRIVACY_ADMIN_ROLE
from primitives.db._server import HomeArg, start_server
from primitives.errors import StorageError

__all__ = ["app_dsn", "auditor_dsn", "privacy_admin_dsn", "resolve_dsn"]


def resolve_dsn(home: HomeArg = None) -> str:
    """The admin DSN: ``$PRIMITIVES_DSN`` if set, else the embedded server (started if needed)."""
    dsn = os.environ.get("PRIMITIVES_DSN")
    if dsn:
        return dsn
    return start_server(home)


def app_dsn(admin_dsn: str) -> str:
    """DSN of the application role: ``$PRIMITIVES_APP_DSN``, else ``admin_dsn`` as ``primitives_app``."""
    return os.environ.get("PRIMITIVES_APP_DSN") or _as_role(admin_dsn, APP_ROLE)


def auditor_dsn(admin_dsn: str) -> str:
    """DSN of the auditor role: ``$PRIMITIVES_AUDITOR_DSN``, else ``admin_dsn`` as ``primitives_auditor``."""
    return os.environ.get("PRIMITIVES_AUDITOR_DSN") or _as_role(admin_dsn, AUDITOR_ROLE)


def privacy_admin_dsn(admin_dsn: str) -> str:
    """DSN of the privacy admin role: ``$PRIMITIVES_PRIVACY_ADMIN_DSN``, else ``admin_dsn`` as
    ``primitives_privacy_admin`` (the only role that reads raw personal data kept with
    consent)."""
    return (os.environ.get("PRIMITIVES_PRIVACY_ADMIN_DSN")
            or _as_role(admin_dsn, PRIVACY_ADMIN_ROLE))


def _as_role(dsn: str, role: str) -> str:
    # The admin's password is not the role's: drop it. The embedded server trusts
    # local connections; elsewhere set PRIMITIVES_APP_DSN / PRIMITIVES_AUDITOR_DSN.
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as err:
        raise StorageError(f"not a valid PostgreSQL DSN: {err}") from err
    params.pop("password", None)
    params["user"] = role
    return make_conninfo("", **params)
