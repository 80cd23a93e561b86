"""PostgreSQL plumbing: embedded server, DSNs, roles, migrations, tenant transactions.

Example::

    from primitives.db import apply_migrations, app_dsn, resolve_dsn, tenant_transaction

    admin = resolve_dsn()              # PRIMITIVES_DSN, else the embedded server
    apply_migrations(admin)            # roles, schema, audit functions (idempotent)
    with psycopg.connect(app_dsn(admin), autocommit=True) as conn:
        with tenant_transaction(conn, "acme") as tx:
            ...
        # or one transaction sent with as few messages as it has statements:
        rows = read_once(conn, "acme", "SELECT * FROM notes WHERE id = %(id)s", {"id": 7})

SQL functions installed by the migrations (schema ``primitives``):
``current_tenant()``, ``has_capability(text)``, ``event_hash(...)``,
``chain_event()``, ``verify_chain(regclass, text, text)``,
``refuse_journal_mutation()``, ``guard_memory_delete()``; where a superuser migrates,
the leakproof full-text match ``ts_match``, operator ``@@`` and GIN operator class
``tsvector_match_ops`` (see ``ensure_text_match``); the view
``capabilities``; the tables ``schema_migrations`` and ``agent_plans``.
"""

from primitives.db._dsn import app_dsn, auditor_dsn, privacy_admin_dsn, resolve_dsn
from primitives.db._json import use_fast_json
from primitives.db._migrate import (
    Migration,
    apply_migrations,
    apply_plan,
    load_migrations,
    migrations_dir,
)
from primitives.db._names import (
    APP_ROLE,
    AUDITOR_ROLE,
    OWNER_ROLE,
    POLICY_SQLSTATES,
    PRIVACY_ADMIN_ROLE,
    SQLSTATE_APPEND_ONLY,
    SQLSTATE_CAPACITY,
    SQLSTATE_JOURNAL_ISOLATION,
    SQLSTATE_LINKED_DELETE,
    SQLSTATE_NON_MIRROR,
    SQLSTATE_PERSISTENT_DELETE,
    TENANT_SETTING,
)
from primitives.db._oneshot import AsyncOnceTransaction, OnceTransaction, aread_once, read_once
from primitives.db._server import (
    SETTINGS_FILE,
    ServerStatus,
    primitives_home,
    server_settings,
    server_status,
    start_server,
    stop_server,
)
from primitives.db._tenant import (
    atenant_transaction,
    check_tenant,
    set_tenant_statement,
    tenant_transaction,
    translate_error,
)
from primitives.db._text_match import (
    TEXT_MATCH_OPCLASS,
    TEXT_MATCH_OPERATOR,
    ensure_text_match,
    has_text_match,
)

__all__ = [
    "APP_ROLE",
    "AUDITOR_ROLE",
    "OWNER_ROLE",
    "POLICY_SQLSTATES",
    "PRIVACY_ADMIN_ROLE",
    "SETTINGS_FILE",
    "SQLSTATE_APPEND_ONLY",
    "SQLSTATE_CAPACITY",
    "SQLSTATE_JOURNAL_ISOLATION",
    "SQLSTATE_LINKED_DELETE",
    "SQLSTATE_NON_MIRROR",
    "SQLSTATE_PERSISTENT_DELETE",
    "TENANT_SETTING",
    "TEXT_MATCH_OPCLASS",
    "TEXT_MATCH_OPERATOR",
    "AsyncOnceTransaction",
    "Migration",
    "OnceTransaction",
    "ServerStatus",
    "app_dsn",
    "apply_migrations",
    "apply_plan",
    "aread_once",
    "atenant_transaction",
    "auditor_dsn",
    "check_tenant",
    "ensure_text_match",
    "has_text_match",
    "load_migrations",
    "migrations_dir",
    "primitives_home",
    "privacy_admin_dsn",
    "read_once",
    "resolve_dsn",
    "server_settings",
    "server_status",
    "set_tenant_statement",
    "start_server",
    "stop_server",
    "tenant_transaction",
    "translate_error",
    "use_fast_json",
]
