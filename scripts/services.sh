#!/usr/bin/env bash
# Makes sure the services wallet-ledger needs are running on this machine: PostgreSQL on
# 127.0.0.1:5432. Starts the local cluster from the installed binaries when it is stopped,
# and says exactly what is missing otherwise. Safe to run any number of times.
set -euo pipefail

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}

if ! command -v pg_isready >/dev/null 2>&1; then
    echo "PostgreSQL client tools are not installed (pg_isready not found)." >&2
    echo "On Debian: apt-get install -y postgresql" >&2
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
