#!/usr/bin/env bash
# Start a local PostgreSQL for the label-store tests and export FORGE_TEST_PG_URL.
# Usage: `source .ci/postgres.sh` (the lead's .ci/run does this before pytest), or run it to print the URL.
# Installs Debian's `postgresql` package with apt-get when missing (needs root), starts (or creates)
# the newest cluster on localhost, creates role/database `forge`/`forge_test`. Idempotent.
# Variables: FORGE_PG_PORT (default 5432), FORGE_PG_DB (forge_test), FORGE_PG_USER (forge).

_forge_pg_setup() {
    local port="${FORGE_PG_PORT:-5432}" db="${FORGE_PG_DB:-forge_test}" user="${FORGE_PG_USER:-forge}"
    local pw="forge" ver
    if ! command -v pg_lsclusters >/dev/null 2>&1; then
        echo "postgres.sh: installing Debian's postgresql package" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } \
            || { echo "postgres.sh: apt-get install postgresql failed" >&2; return 1; }
    fi
    ver=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
    [ -n "$ver" ] || { echo "postgres.sh: no PostgreSQL server under /usr/lib/postgresql" >&2; return 1; }
    if [ -z "$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main"')" ]; then
        pg_createcluster "$ver" main -p "$port" >/dev/null || return 1
    fi
    if [ -z "$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" && $4=="online"')" ]; then
        pg_ctlcluster "$ver" main start || { echo "postgres.sh: cluster $ver/main failed to start" >&2; return 1; }
    fi
    port=$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" {print $3}')
    local i
    for i in $(seq 1 30); do  # wait at most 30 s for the server
        pg_isready -q -h localhost -p "$port" && break
        sleep 1
    done
    pg_isready -q -h localhost -p "$port" || { echo "postgres.sh: server not ready on port $port" >&2; return 1; }
    [ "$(su postgres -c "psql -q -p $port -tAc \"SELECT 1 FROM pg_roles WHERE rolname='$user'\"")" = 1 ] \
        || su postgres -c "psql -q -p $port -c \"CREATE ROLE $user LOGIN PASSWORD '$pw'\"" >/dev/null
    [ "$(su postgres -c "psql -q -p $port -tAc \"SELECT 1 FROM pg_database WHERE datname='$db'\"")" = 1 ] \
        || su postgres -c "createdb -p $port -O $user $db"
    export FORGE_TEST_PG_URL="postgresql+psycopg://$user:$pw@localhost:$port/$db"
    echo "FORGE_TEST_PG_URL=$FORGE_TEST_PG_URL"
}

# Never abort the caller (.ci/run uses set -e): without a URL the PostgreSQL tests fail loudly under CI=true.
_forge_pg_setup || echo "postgres.sh: PostgreSQL unavailable; FORGE_TEST_PG_URL not set" >&2
unset -f _forge_pg_setup
