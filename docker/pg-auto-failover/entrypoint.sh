#!/bin/sh
# One pg_auto_failover process per container, for compose.yaml's `ha` profile (a lab, like the
# rest of compose.yaml: trust authentication on the project network).
#
#   entrypoint.sh monitor      the monitor; the data nodes reach it as pg-monitor
#   entrypoint.sh node NAME    a data node; NAME is its compose service name (its host name on
#                              the network), also its pg_auto_failover node name
#   entrypoint.sh health       the healthcheck: the keeper was started and PostgreSQL answers
#
# The first start creates the instance (`pg_autoctl create`); every start then applies the
# settings below (each at most once) and becomes `pg_autoctl run`. PGDATA and the XDG_* folders
# (pg_autoctl's configuration and state) are set by the Dockerfile, on the container's volume.
set -eu

MONITOR_HOST=pg-monitor
MONITOR_URI="postgres://autoctl_node@$MONITOR_HOST:5432/pg_auto_failover?sslmode=require"
PGCTL=/usr/lib/postgresql/15/bin/pg_ctl
# Written once `pg_autoctl create` succeeded: a second `create` of a node fails.
CREATED="$XDG_DATA_HOME/wallet-ledger-created"
# Written just before `pg_autoctl run`; lost with the container (not on the volume).
STARTED="$XDG_RUNTIME_DIR/wallet-ledger-started"
SETTINGS_MARK="# compose.yaml (ha profile): settings of docker/pg-auto-failover/entrypoint.sh"

usage() {
    echo "usage: $0 monitor | node NAME | health" >&2
    exit 2
}

say() { echo "entrypoint: $*" >&2; }

# Appends each line to the file unless the file has it already (a restart, or a node whose
# files were copied from the primary by pg_basebackup).
append_missing() { # file line...
    file=$1
    shift
    for line in "$@"; do
        grep -qxF -- "$line" "$file" || printf '%s\n' "$line" >>"$file"
    done
}

create() { # monitor | postgres, then that command's own flags
    kind=$1
    shift
    pg_autoctl create "$kind" --pgdata "$PGDATA" --pgport 5432 --pgctl "$PGCTL" \
        --auth trust --ssl-self-signed --hostname "$name" "$@"
}

case "${1:-}" in
    health)
        [ -e "$STARTED" ] || exit 1
        exec pg_isready -q -h 127.0.0.1 -p 5432
        ;;
    monitor)
        [ $# -eq 1 ] || usage
        role=monitor
        name=$MONITOR_HOST
        ;;
    node)
        [ $# -eq 2 ] || usage
        role=node
        name=$2
        ;;
    *) usage ;;
esac

# Left by the previous container, if it was killed: pg_autoctl's pid file (in a new container
# its pid may belong to a live process, even to the new pg_autoctl itself) and PostgreSQL's.
# Nothing else uses this volume, and no PostgreSQL of this container runs yet.
rm -rf "$XDG_RUNTIME_DIR"
mkdir -p "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
rm -f "$PGDATA/postmaster.pid"

if [ ! -e "$CREATED" ]; then
    say "creating $role $name"
    if [ "$role" = monitor ]; then
        create monitor
    else
        # The first node to register initializes the database and becomes the primary; the
        # next one is copied from it (pg_basebackup) and becomes its synchronous standby.
        create postgres --name "$name" --monitor "$MONITOR_URI" --dbname wallet_ledger
    fi
    mkdir -p "$(dirname "$CREATED")"
    touch "$CREATED"
fi

# `create monitor` can leave its PostgreSQL running, which `run` then fails to start again.
if "$PGCTL" -D "$PGDATA" status >/dev/null 2>&1; then
    "$PGCTL" -D "$PGDATA" -m fast -w stop
fi

if [ "$role" = monitor ]; then
    # The monitor has no --listen: make sure it listens on the network, not only on loopback.
    pg_autoctl config set --pgdata "$PGDATA" postgresql.listen_addresses '*'
fi

# Later lines of postgresql.conf win over pg_autoctl's included file. Its auto-tuning sizes
# shared_buffers for the whole host (~6 GB on a 2-core machine), for each of three instances.
if ! grep -qxF -- "$SETTINGS_MARK" "$PGDATA/postgresql.conf"; then
    {
        echo "$SETTINGS_MARK"
        echo "shared_buffers = 128MB"
        echo "effective_cache_size = 512MB"
        echo "maintenance_work_mem = 64MB"
        echo "work_mem = 4MB"
        echo "max_connections = 100"
        if [ "$role" = monitor ]; then
            # Fail over ~8 s after a node is lost instead of the defaults' ~50 s (20 s to
            # call it unhealthy, 30 s for the old primary to demote), as scripts/ha.sh does.
            # In the file rather than ALTER SYSTEM: in effect from the monitor's first start.
            echo "pgautofailover.health_check_period = 1000"
            echo "pgautofailover.health_check_timeout = 1000"
            echo "pgautofailover.health_check_max_retries = 1"
            echo "pgautofailover.health_check_retry_delay = 500"
            echo "pgautofailover.node_considered_unhealthy_timeout = 3000"
            echo "pgautofailover.primary_demote_timeout = 5000"
        fi
    } >>"$PGDATA/postgresql.conf"
fi

# Lab only: any container on the project network may connect as any role without a password
# (the app, and pg_auto_failover's own connections). pg_autoctl's own rules allow each other
# node by the address its host name had when they were written, and a recreated container may
# get another one; `all` does not cover replication, hence its own line.
append_missing "$PGDATA/pg_hba.conf" \
    "# compose.yaml (ha profile), a lab only: the project network, without passwords" \
    "host all all samenet trust" \
    "host replication all samenet trust"

touch "$STARTED"
exec pg_autoctl run --pgdata "$PGDATA"
