#!/usr/bin/env bash
# A Citus cluster for tests: a coordinator and N workers (two unless told), PostgreSQL 15
# clusters of the machine's binaries with shared_preload_libraries = 'citus', on loopback ports
# of their own, in a folder of their own. Never touches the machine's PostgreSQL (5432).
#
# Subcommands (results on stdout; logs on stderr and in files in CITUS_DIR):
#   up [--workers N]
#             install Citus when citus.so is missing (as root: bash ../shared/citus/install.sh;
#             otherwise print that command and exit 1), initdb and start the coordinator and
#             N workers (default: CITUS_WORKERS, else 2), create the database wallet_ledger with
#             the extension citus on each, set the coordinator host and register every worker;
#             when already up, start what is stopped and print the line again (asking for
#             another N than the running cluster has is an error: `down` first). Nodes that
#             someone registered by hand besides ours are left alone. stdout ends with one
#             shell-sourceable line:
#               DATABASE_URL=postgres://postgres@127.0.0.1:PORT/wallet_ledger?sslmode=disable
#   down      stop and kill everything of CITUS_DIR, wait until its ports are free, remove it
#   status    human-readable state of the nodes and the workers the coordinator sees
#
# CITUS_DIR (default /tmp/wallet-ledger-citus) holds a `ports` file (WORKERS=N,
# COORDINATOR_PORT, WORKER1_PORT...), one data folder per node (coordinator, worker1...), their
# logs and sockets. Ports are picked free and reserved in
# /tmp/wallet-ledger-ha.d, shared with scripts/ha.sh and scripts/redis-cluster.sh; processes are
# found by their data folder, so `down` of one folder never touches another. Every node trusts
# loopback connections (no password): for tests only.
#
# Measured on a 2-core machine with Citus 13.2.2 already installed, 3 cycles in a row (two
# workers; `--workers 3` was not timed on a quiet machine): `up` from
# nothing 3.6-4.0 s, `up` when up 0.2 s, `up` after a worker's postmaster was SIGKILLed (it
# starts it again) 1.5-2 s, `down` 0.6-0.7 s. Checked each time: both workers active, a table
# distributed with create_distributed_table has its 32 shards 16 and 16 on the workers, and a
# transaction writing rows on both commits.
set -euo pipefail

CITUS_DIR=${CITUS_DIR:-/tmp/wallet-ledger-citus}
case $CITUS_DIR in /*) ;; *) CITUS_DIR=$PWD/$CITUS_DIR ;; esac
CITUS_DIR=${CITUS_DIR%/}
PGBIN=/usr/lib/postgresql/15/bin
SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
REPO=$(cd "$(dirname "$0")/.." && pwd)
INSTALL="bash $(cd "$REPO/.." && pwd)/shared/citus/install.sh"
WORKERS=${CITUS_WORKERS:-}
NODES=()

say() { echo "citus.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source=lib/ports.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/ports.sh"

case $CITUS_DIR in
    / | /tmp | /var | /home | /root | /usr | /etc) die "CITUS_DIR=$CITUS_DIR is not a folder of its own" ;;
    *[!A-Za-z0-9._/-]*) die "CITUS_DIR may only contain letters, digits and . _ / -" ;;
esac

# Runs a command as the postgres user (initdb and postgres refuse root), with nothing of the
# caller's environment (PGPORT, PGDATABASE...); LANG makes initdb pick UTF8.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- env -i PATH="$PGBIN:$SYS_PATH" LANG=C.UTF-8 "$@" 9>&- 8>&-
    else
        env -i PATH="$PGBIN:$SYS_PATH" LANG=C.UTF-8 "$@" 9>&- 8>&-
    fi
}

pgsql() { # port database sql: one statement as postgres, unaligned output
    timeout 60 env -i PATH="$SYS_PATH" LANG=C.UTF-8 PGCONNECT_TIMEOUT=3 PGOPTIONS="-c client_min_messages=warning" \
        "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3"
}

wait_until() { # seconds description command...: polls COMMAND every 0.2 s
    local seconds=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + seconds))
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || { say "timed out after ${seconds}s waiting for $what"; return 1; }
        sleep 0.2
    done
}

listening() { [ -n "$(ss -Hltn "( sport = :$1 )")" ]; }

wait_port_closed() { # port
    for _ in $(seq 1 100); do
        listening "$1" || return 0
        sleep 0.1
    done
    die "port $1 is still in use"
}

## Processes

# The postmaster of a data folder, when it runs and its command line names that folder.
postmaster_pid() { # pgdata
    local pid
    pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null || true)
    case $pid in '' | *[!0-9]*) return 0 ;; esac
    grep -qszxF -- "$1" "/proc/$pid/cmdline" && echo "$pid"
    return 0
}

# Processes whose command line names the folder (postmasters, a pg_ctl or initdb under way).
pids_naming() {
    local re="(^| )${CITUS_DIR//./\\.}(/| |\$)"
    grep -lszE -- "$re" /proc/[0-9]*/cmdline | cut -d/ -f3 | grep -vx "$$" || true
}

our_pids() {
    local node
    for node in "${NODES[@]}"; do postmaster_pid "$CITUS_DIR/$node"; done
    pids_naming
}

# SIGKILLs what our_pids prints and the children of each (a postmaster's children lose their
# command line and are found only through it), until nothing is left.
kill_until_gone() {
    local pids
    for _ in $(seq 1 100); do
        pids=$(our_pids | sort -un)
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2046,SC2086
        kill -9 $pids $(for p in $pids; do pgrep -P "$p"; done) 2>/dev/null || true
        sleep 0.1
    done
    die "could not kill: $pids"
}

## Ports: scripts/lib/ports.sh

## Nodes

# The folder's own worker count wins over the one asked for; asking up for another is an error.
load_ports() {
    local asked=$WORKERS
    read_ports
    [ -z "$asked" ] || [ "$asked" = "$WORKERS" ] ||
        die "the cluster in $CITUS_DIR has $WORKERS workers, not $asked: run down first"
}

read_ports() {
    [ -f "$CITUS_DIR/ports" ] || die "Citus is not up in $CITUS_DIR"
    WORKERS=
    # shellcheck disable=SC1091
    . "$CITUS_DIR/ports"
    WORKERS=${WORKERS:-2} # folders made before the count was recorded had two
    set_nodes
}

set_nodes() {
    local i
    NODES=(coordinator)
    for i in $(seq 1 "$WORKERS"); do NODES+=("worker$i"); done
}

worker_nodes() { printf '%s\n' "${NODES[@]:1}"; }

node_port() { # node
    local var="${1^^}_PORT"
    echo "${!var}"
}

# sslmode=disable: `create extension citus` turns ssl on with a self-signed X.509 v1
# certificate, which the service's TLS (rustls) refuses, and the default sslmode=prefer tries it.
url() { echo "DATABASE_URL=postgres://postgres@127.0.0.1:$COORDINATOR_PORT/wallet_ledger?sslmode=disable"; }

citus_installed() { [ -f "$("$PGBIN/pg_config" --pkglibdir)/citus.so" ]; }

ensure_citus() {
    citus_installed && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "Citus is not installed; as root run: $INSTALL"
        exit 1
    fi
    say "installing Citus: $INSTALL"
    $INSTALL >&2 9>&- || die "$INSTALL failed"
}

init_node() { # node
    local node=$1 data=$CITUS_DIR/$1
    say "initdb $node on $(node_port "$node")"
    as_pg "$PGBIN/initdb" -D "$data" --auth trust -U postgres >>"$CITUS_DIR/$node.log" 2>&1 ||
        die "initdb failed: see $CITUS_DIR/$node.log"
    # Later lines of postgresql.conf win. max_prepared_transactions: Citus commits a
    # transaction that wrote on several workers with two-phase commit. max_worker_processes:
    # Citus runs a maintenance worker per database with the extension (2PC recovery, deadlock
    # detection), and tests/citus makes one database per test.
    cat >>"$data/postgresql.conf" <<CONF
# wallet-ledger scripts/citus.sh
port = $(node_port "$node")
listen_addresses = '127.0.0.1'
unix_socket_directories = '$CITUS_DIR/sockets'
shared_preload_libraries = 'citus'
# Workers accept more connections than the coordinator's shared pool opens to each (the
# ledger's sessions keep up to 8 per worker: docs/scaling.md, "Session settings").
max_connections = 300
citus.max_shared_pool_size = 200
max_prepared_transactions = 100
max_worker_processes = 64
shared_buffers = 128MB
effective_cache_size = 512MB
maintenance_work_mem = 64MB
work_mem = 4MB
wal_level = logical
# No reports to Citus Data's servers (packaged builds send them by default).
citus.enable_statistics_collection = off
CONF
}

node_running() { [ -n "$(postmaster_pid "$CITUS_DIR/$1")" ]; }

# Whether the postmaster that last ran in a data folder is gone: a killed one stays a zombie
# until reaped, and PostgreSQL refuses to start while the pid of its lock files exists.
old_postmaster_gone() { # pgdata
    local pid
    pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null || true)
    case $pid in '' | *[!0-9]*) return 0 ;; esac
    [ ! -e "/proc/$pid" ]
}

start_node() { # node
    local node=$1
    wait_until 30 "the old postmaster of $node to be gone" old_postmaster_gone "$CITUS_DIR/$node" || true
    rm -f "$CITUS_DIR/$node/postmaster.pid"
    wait_port_closed "$(node_port "$node")"
    # pg_ctl -l: the server's stderr goes to the log, not to ours (a daemon holding the
    # caller's stdout would make `$(citus.sh up)` hang).
    # shellcheck disable=SC2094 # both append to the log; nothing reads it
    as_pg "$PGBIN/pg_ctl" -D "$CITUS_DIR/$node" -l "$CITUS_DIR/$node.log" -w -t 60 start \
        </dev/null >>"$CITUS_DIR/$node.log" 2>&1 || die "$node did not start: see $CITUS_DIR/$node.log"
}

# Database, extension, coordinator host and workers; each step does nothing when done.
setup() {
    local node port
    for node in "${NODES[@]}"; do
        port=$(node_port "$node")
        if [ -z "$(pgsql "$port" postgres "select 1 from pg_database where datname = 'wallet_ledger'")" ]; then
            pgsql "$port" postgres "create database wallet_ledger" >/dev/null
        fi
        pgsql "$port" wallet_ledger "create extension if not exists citus" >/dev/null
    done
    pgsql "$COORDINATOR_PORT" wallet_ledger "select citus_set_coordinator_host('127.0.0.1', $COORDINATOR_PORT)" >/dev/null
    for node in $(worker_nodes); do
        port=$(node_port "$node")
        pgsql "$COORDINATOR_PORT" wallet_ledger "select citus_add_node('127.0.0.1', $port)" >/dev/null
        # Each of ours must be active; other nodes registered by hand do not matter here.
        [ -n "$(pgsql "$COORDINATOR_PORT" wallet_ledger \
            "select 1 from citus_get_active_worker_nodes() where node_port = $port")" ] ||
            die "the coordinator does not see $node (port $port) as an active worker"
    done
}

up() {
    ensure_citus
    lock_folder "$CITUS_DIR"
    if [ -d "$CITUS_DIR" ] && [ ! -e "$CITUS_DIR/.wallet-ledger-citus" ] && [ -n "$(ls -A "$CITUS_DIR")" ]; then
        die "$CITUS_DIR exists and was not made by citus.sh"
    fi
    local node
    if [ -f "$CITUS_DIR/ports" ] && [ -f "$CITUS_DIR/.initialized" ]; then
        load_ports
        for node in "${NODES[@]}"; do
            node_running "$node" || { say "starting $node again"; start_node "$node"; }
        done
        setup
        url
        return
    fi
    down_unlocked
    mkdir -p "$CITUS_DIR/sockets"
    touch "$CITUS_DIR/.wallet-ledger-citus"
    WORKERS=${WORKERS:-2}
    set_nodes
    write_ports "$(reserve_ports "${#NODES[@]}" "$CITUS_DIR" | tr '\n' ' ')"
    # The servers (as postgres) append to the same logs as this script.
    for node in "${NODES[@]}"; do touch "$CITUS_DIR/$node.log"; done
    [ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$CITUS_DIR"
    for node in "${NODES[@]}"; do init_node "$node"; done
    for node in "${NODES[@]}"; do start_node "$node"; done
    setup
    touch "$CITUS_DIR/.initialized"
    say "coordinator on $COORDINATOR_PORT, $WORKERS workers on $(for node in $(worker_nodes); do node_port "$node"; done | paste -sd ' ')"
    url
}

write_ports() { # "port port...": the coordinator's, then one per worker
    local node i=0 ports
    read -r -a ports <<<"$1"
    echo "WORKERS=$WORKERS" >"$CITUS_DIR/ports"
    for node in "${NODES[@]}"; do
        printf '%s_PORT=%s\n' "${node^^}" "${ports[$i]}" >>"$CITUS_DIR/ports"
        i=$((i + 1))
    done
    read_ports
}

down_unlocked() {
    [ -d "$CITUS_DIR" ] || { release_ports "$CITUS_DIR"; return 0; }
    [ -e "$CITUS_DIR/.wallet-ledger-citus" ] || die "$CITUS_DIR was not made by citus.sh: not removing it"
    local node asked=$WORKERS
    [ -f "$CITUS_DIR/ports" ] && read_ports
    for node in "${NODES[@]}"; do
        if node_running "$node"; then
            as_pg "$PGBIN/pg_ctl" -D "$CITUS_DIR/$node" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
        fi
    done
    kill_until_gone
    if [ -f "$CITUS_DIR/ports" ]; then
        for node in "${NODES[@]}"; do wait_port_closed "$(node_port "$node")"; done
    fi
    rm -rf "$CITUS_DIR"
    release_ports "$CITUS_DIR"
    WORKERS=$asked
}

down() {
    lock_folder "$CITUS_DIR"
    down_unlocked
}

status() {
    echo "CITUS_DIR=$CITUS_DIR"
    if [ ! -f "$CITUS_DIR/ports" ]; then
        echo "Citus: not up"
        return
    fi
    read_ports
    local node
    for node in "${NODES[@]}"; do
        if node_running "$node"; then
            echo "  $node: running on 127.0.0.1:$(node_port "$node") (pid $(postmaster_pid "$CITUS_DIR/$node"))"
        else
            echo "  $node: stopped (port $(node_port "$node"))"
        fi
    done
    echo "  active workers (citus_get_active_worker_nodes):"
    pgsql "$COORDINATOR_PORT" wallet_ledger \
        "select '    ' || node_name || ':' || node_port from citus_get_active_worker_nodes() order by 1" 2>/dev/null ||
        echo "    the coordinator does not answer"
    url
}

# up's options; the count must be a small positive number (it names folders and ports).
parse_up() {
    while [ $# -gt 0 ]; do
        case $1 in
            --workers) WORKERS=${2:-}; shift 2 || die "--workers needs a number" ;;
            --workers=*) WORKERS=${1#--workers=}; shift ;;
            *) die "unknown option for up: $1" ;;
        esac
    done
    case $WORKERS in
        '') ;;
        [1-9] | [1-9][0-9]) ;;
        *) die "--workers (or CITUS_WORKERS) must be a number from 1 to 99, not '$WORKERS'" ;;
    esac
}

case "${1:-}" in
    up) shift; parse_up "$@"; up ;;
    down) down ;;
    status) status ;;
    *)
        sed -n '/^# Subcommands/,/^#$/p' "$0" >&2
        exit 2
        ;;
esac
