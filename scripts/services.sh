#!/usr/bin/env bash
# Makes sure the services wallet-ledger needs are running on this machine: PostgreSQL on
# 127.0.0.1:5432 and Redis (or Valkey) on 127.0.0.1:6379, plus the Python package the webhook
# tests verify signatures with. Starts local services from the installed binaries when they are
# stopped, and says exactly what is missing otherwise. Safe to run any number of times.
set -euo pipefail

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}

if ! command -v pg_isready >/dev/null 2>&1; then
    echo "PostgreSQL client tools are not installed (pg_isready not found)." >&2
    echo "On Debian: apt-get install -y postgresql" >&2
    exit 1
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
        echo "Redis is not running on $REDIS_HOST:$REDIS_PORT and neither valkey-server nor redis-server is installed." >&2
        echo "Install one (Debian: apt-get install -y redis-server) or point REDIS_URL at a server you have." >&2
        exit 1
    fi
    echo "starting $(basename "$server") on $REDIS_HOST:$REDIS_PORT (no persistence)" >&2
    "$server" --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save "" --appendonly no
    for _ in $(seq 1 30); do
        redis_up && break
        sleep 0.2
    done
    redis_up || { echo "Redis was started but does not answer on $REDIS_HOST:$REDIS_PORT." >&2; exit 1; }
fi

# The webhook tests check signatures with the convention's own Python library, not ours.
if command -v python3 >/dev/null 2>&1; then
    if ! python3 -c 'import standardwebhooks' 2>/dev/null; then
        echo "installing the Python package standardwebhooks (the webhook tests' signature checker)" >&2
        python3 -m pip install --quiet --disable-pip-version-check 'standardwebhooks==1.1.0' >&2 || {
            echo "could not install standardwebhooks from PyPI; the webhook tests need it" >&2
            exit 1
        }
    fi
    # CI validates openapi/openapi.json against the OpenAPI 3.1 specification with it.
    if ! python3 -c 'import openapi_spec_validator' 2>/dev/null; then
        echo "installing the Python package openapi-spec-validator (CI's check of openapi/openapi.json)" >&2
        python3 -m pip install --quiet --disable-pip-version-check 'openapi-spec-validator==0.9.0' >&2 || {
            echo "could not install openapi-spec-validator from PyPI; CI needs it" >&2
            exit 1
        }
    fi
else
    echo "python3 is not installed; the webhook tests need it (Debian: apt-get install -y python3-pip)" >&2
    exit 1
fi

if pg_isready -h "$PGHOST" -p "$PGPORT" -q; then
    exit 0
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
