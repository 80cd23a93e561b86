#!/usr/bin/env bash
# Opt-in (not part of `make test`): the quick start against Debian's PostgreSQL 15, no pgvector,
# scram-sha-256 passwords on loopback, following docs/own-postgres.md. Needs postgresql-15
# (apt-get install -y postgresql-15); run as root or as the postgres user, from a checkout.
# Usage: scripts/pg15-check.sh [PYTHON]   (default: python3; primitives must be importable)
set -euo pipefail
PY=${1:-python3}
BIN=/usr/lib/postgresql/15/bin
DIR=$(mktemp -d /tmp/pg15-check.XXXXXX); PORT=${PORT:-5515}
run() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
chown postgres "$DIR" 2>/dev/null || true
echo admin-pw > "$DIR/pw"; chmod 600 "$DIR/pw"; chown postgres "$DIR/pw" 2>/dev/null || true
run "$BIN/initdb" -D "$DIR/data" -U postgres --auth=scram-sha-256 --pwfile="$DIR/pw" >/dev/null
run "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w \
    -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR" start
trap 'run "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null; rm -rf "$DIR"' EXIT
export PRIMITIVES_DSN="host=127.0.0.1 port=$PORT user=postgres password=admin-pw dbname=postgres"
unset PRIMITIVES_APP_DSN PRIMITIVES_AUDITOR_DSN PRIMITIVES_PRIVACY_ADMIN_DSN
# 1. the runtime roles have no password yet: the failure names its cause, at once
$PY -m primitives.cli migrate agents/spectral_agent.yaml
$PY -c 'from primitives import Engine, load_spec; Engine.connect(load_spec("agents/spectral_agent.yaml"))' \
    2>&1 | tail -1 || true
# 2. the documented step: a password per runtime role, handed over in the role DSNs
PGPASSWORD=admin-pw psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
    -c "ALTER ROLE primitives_app PASSWORD 'app-pw'" \
    -c "ALTER ROLE primitives_auditor PASSWORD 'auditor-pw'"
export PRIMITIVES_APP_DSN="host=127.0.0.1 port=$PORT user=primitives_app password=app-pw dbname=postgres"
export PRIMITIVES_AUDITOR_DSN="host=127.0.0.1 port=$PORT user=primitives_auditor password=auditor-pw dbname=postgres"
# 3. the README's quick start, then the auditor's chain check and the catalog checks
$PY scripts/quickstart.py
$PY -m primitives.cli audit verify agents/spectral_agent.yaml
$PY -m primitives.cli doctor agents/spectral_agent.yaml
echo "pg15-check: ok"
