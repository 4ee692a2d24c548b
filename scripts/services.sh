#!/usr/bin/env bash
# Makes sure the services wallet-ledger needs are running on this machine: PostgreSQL on
# 127.0.0.1:5432 and Redis (or Valkey) on 127.0.0.1:6379, plus the Python packages the tests
# use. Starts local services from the installed binaries when they are stopped. What is not
# installed is installed from Debian's packages when this runs as root on Debian; otherwise it
# prints the exact command to run. Safe to run any number of times.
set -euo pipefail

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}

# Installs Debian packages as root, or prints the command and stops.
apt_updated=no
apt_install() {
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "missing: $*; install with: sudo apt-get install -y $*" >&2
        exit 1
    fi
    echo "installing $* from Debian's packages" >&2
    if [ "$apt_updated" = no ]; then
        apt-get update -qq >&2
        apt_updated=yes
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

installed_postgres=no
if ! command -v pg_isready >/dev/null 2>&1; then
    apt_install postgresql
    installed_postgres=yes
fi

REDIS_HOST=${REDIS_HOST:-127.0.0.1}
REDIS_PORT=${REDIS_PORT:-6379}

# Redis first (quick), then PostgreSQL.
redis_up() {
    if command -v redis-cli >/dev/null 2>&1; then
        [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
    else
        (exec 3<>"/dev/tcp/$REDIS_HOST/$REDIS_PORT") 2>/dev/null
    fi
}
if ! redis_up; then
    server=$(command -v valkey-server || command -v redis-server || true)
    if [ -z "$server" ]; then
        echo "Redis is not running on $REDIS_HOST:$REDIS_PORT and neither valkey-server nor redis-server is installed (or point REDIS_URL at a server you have)." >&2
        apt_install redis-server
        server=$(command -v redis-server)
    fi
    echo "starting $(basename "$server") on $REDIS_HOST:$REDIS_PORT (no persistence)" >&2
    "$server" --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save "" --appendonly no
    for _ in $(seq 1 30); do
        redis_up && break
        sleep 0.2
    done
    redis_up || { echo "Redis was started but does not answer on $REDIS_HOST:$REDIS_PORT." >&2; exit 1; }
fi

# Debian's own Python refuses pip installs outside a virtual environment (PEP 668) unless told.
pip_install() {
    python3 -m pip install --quiet --disable-pip-version-check "$1" >&2 ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$1" >&2
}

# The webhook tests check signatures with the convention's own Python library, not ours.
if command -v python3 >/dev/null 2>&1; then
    if ! python3 -c 'import standardwebhooks' 2>/dev/null; then
        echo "installing the Python package standardwebhooks (the webhook tests' signature checker)" >&2
        pip_install 'standardwebhooks==1.1.0' || {
            echo "could not install standardwebhooks from PyPI; the webhook tests need it" >&2
            exit 1
        }
    fi
    # CI validates openapi/openapi.json against the OpenAPI 3.1 specification with it.
    if ! python3 -c 'import openapi_spec_validator' 2>/dev/null; then
        echo "installing the Python package openapi-spec-validator (CI's check of openapi/openapi.json)" >&2
        pip_install 'openapi-spec-validator==0.9.0' || {
            echo "could not install openapi-spec-validator from PyPI; CI needs it" >&2
            exit 1
        }
    fi
else
    apt_install python3-pip
    exec bash "$0" "$@"
fi

if pg_isready -h "$PGHOST" -p "$PGPORT" -q; then
    exit 0
fi

# A cluster Debian's package just made asks TCP clients for a password; the tests and the
# README connect as `postgres` without one. Only a cluster installed here, never an existing one.
if [ "$installed_postgres" = yes ]; then
    for hba in /etc/postgresql/*/main/pg_hba.conf; do
        [ -f "$hba" ] || continue
        printf '%s\n' "local all all trust" "host all all 127.0.0.1/32 trust" "host all all ::1/128 trust" |
            cat - "$hba" >"$hba.new"
        mv "$hba.new" "$hba"
        chown postgres:postgres "$hba"
    done
fi

if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql)" ]; then
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    echo "starting PostgreSQL $version (cluster main)" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
else
    echo "PostgreSQL is not running on $PGHOST:$PGPORT and no local cluster is installed." >&2
    echo "Install one (Debian: apt-get install -y postgresql) or point DATABASE_URL at a server you have." >&2
    exit 1
fi

for _ in $(seq 1 30); do
    pg_isready -h "$PGHOST" -p "$PGPORT" -q && exit 0
    sleep 1
done
echo "PostgreSQL was started but is not accepting connections on $PGHOST:$PGPORT after 30 s." >&2
exit 1
