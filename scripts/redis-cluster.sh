#!/usr/bin/env bash
# A Redis Cluster for tests: three masters and three replicas (Redis 7, cluster mode, no
# persistence) on loopback ports of their own, in a folder of their own. Never touches the
# machine's Redis (6379).
#
# Subcommands (results on stdout; logs on stderr and in files in REDIS_CLUSTER_DIR):
#   up        start the six servers, join them with `redis-cli --cluster create
#             --cluster-replicas 1` and wait until every node reports cluster_state:ok with all
#             16384 slots served and six known nodes; when already up, start what is stopped
#             (see below) and print the line again. stdout ends with one shell-sourceable line:
#               REDIS_URL=redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...,127.0.0.1:P6
#   down      kill everything of REDIS_CLUSTER_DIR, wait until its ports are free, remove it
#   status    human-readable state: each node's role, slots and cluster_state
#
# REDIS_CLUSTER_DIR (default /tmp/wallet-ledger-redis-cluster) holds a `ports` file and, per
# node, a config file, a data folder (with the node's nodes.conf), a log and a pid file. Each
# node's cluster bus has a port of its own (cluster-port), not the default port + 10000, which
# could land in the ephemeral range. Ports are picked free and reserved in /tmp/wallet-ledger-ha.d,
# shared with scripts/ha.sh and scripts/citus.sh; every process is found by its session, its
# command line or its environment, so `down` of one folder never touches another.
#
# A node is taken for failed after cluster-node-timeout (2 s here); its replica is then promoted.
# No persistence: a server that stopped comes back empty. `up` therefore starts a stopped node
# again only once the cluster no longer lets it serve slots (its replica took over), so that it
# rejoins as a replica; a master whose replica is gone too is not restarted (its slots' data is
# lost: `down` and `up`).
#
# Measured on a 2-core machine (Redis 7.0.15), 3 cycles in a row: `up` from nothing 2.6-3.0 s,
# `up` when up 0.3 s, `down` 0.4 s; `up` after a master was SIGKILLed 2.5-4 s (the node timeout,
# its replica's promotion, the old master back as its replica; the keys of its slots kept),
# after a replica was 0.3 s.
set -euo pipefail

REDIS_CLUSTER_DIR=${REDIS_CLUSTER_DIR:-/tmp/wallet-ledger-redis-cluster}
case $REDIS_CLUSTER_DIR in /*) ;; *) REDIS_CLUSTER_DIR=$PWD/$REDIS_CLUSTER_DIR ;; esac
DIR=${REDIS_CLUSTER_DIR%/}
SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
MARK="WALLET_LEDGER_REDIS_CLUSTER=$DIR"
NODE_TIMEOUT_MS=2000
# Redis rewrites its process title, losing the config path of its command line: put it back.
REDIS_TITLE='proc-title-template "{title} {listen-addr} {server-mode} {config-file}"'

say() { echo "redis-cluster.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source=lib/ports.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/ports.sh"

case $DIR in
    / | /tmp | /var | /home | /root | /usr | /etc) die "REDIS_CLUSTER_DIR=$DIR is not a folder of its own" ;;
    *[!A-Za-z0-9._/-]*) die "REDIS_CLUSTER_DIR may only contain letters, digits and . _ / -" ;;
esac
DIR_RE="(^| )${DIR//./\\.}(/| |\$)"

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    die "redis-server and redis-cli are needed (Redis 7); as root run: apt-get install -y redis-server"
fi

## Processes

# Starts a command in the background in a session of its own (nothing done to the caller's
# process group reaches it, and it is found by session later), inheriting no descriptor of ours:
# a daemon holding the caller's stdout would make `$(redis-cluster.sh up)` hang. The pid file
# holds the session id.
spawn() { # pidfile logfile command...
    local pidfile=$1 log=$2
    shift 2
    rm -f "$pidfile"
    # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
    setsid sh -c 'echo $$ >"$0" && exec "$@"' "$pidfile" "$@" </dev/null >>"$log" 2>&1 9>&- 8>&- &
    for _ in $(seq 1 50); do
        [ -s "$pidfile" ] && return 0
        sleep 0.1
    done
    die "could not start $*"
}

is_ours() { # pid
    grep -qszE -- "$DIR_RE" "/proc/$1/cmdline" || grep -qszxF -- "$MARK" "/proc/$1/environ"
}

# Every process of the session whose id the pid file holds, when one of them is ours (a
# session id left in a stale pid file may belong to someone else now).
session_pids() { # pidfile
    local sid members pid
    [ -s "$1" ] || return 0
    sid=$(cat "$1")
    case $sid in '' | *[!0-9]*) return 0 ;; esac
    members=$(pgrep -s "$sid" || true)
    for pid in $members; do
        if is_ours "$pid"; then
            echo "$members"
            return 0
        fi
    done
}

pids_naming() { # path
    local re="(^| )${1//./\\.}(/| |\$)"
    grep -lszE -- "$re" /proc/[0-9]*/cmdline | cut -d/ -f3 | grep -vx "$$" || true
}

kill_until_gone() { # function args...
    local pids
    for _ in $(seq 1 100); do
        pids=$("$@" | sort -un)
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null || true
        sleep 0.1
    done
    die "could not kill: $pids"
}

listening() { [ -n "$(ss -Hltn "( sport = :$1 )")" ]; }

wait_port_closed() { # port
    for _ in $(seq 1 100); do
        listening "$1" || return 0
        sleep 0.1
    done
    die "port $1 is still in use"
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

## Ports: scripts/lib/ports.sh

## Nodes

rcli() { # port command...
    timeout 5 env -i PATH="$SYS_PATH" redis-cli -h 127.0.0.1 -p "$@"
}

# PORTS: the six client ports (the first three start as masters); BUS_PORTS: their bus ports.
load_ports() {
    [ -f "$DIR/ports" ] || die "Redis Cluster is not up in $DIR"
    # shellcheck disable=SC1091
    . "$DIR/ports"
    read -r -a PORTS <<<"$CLIENT_PORTS"
    read -r -a BUSES <<<"$BUS_PORTS"
}

url() {
    local port list=()
    for port in "${PORTS[@]}"; do list+=("127.0.0.1:$port"); done
    echo "REDIS_URL=redis+cluster://$(IFS=,; echo "${list[*]}")"
}

write_conf() { # port bus-port
    mkdir -p "$DIR/data-$1"
    cat >"$DIR/server-$1.conf" <<CONF
port $1
bind 127.0.0.1
daemonize no
dir $DIR/data-$1
save ""
appendonly no
logfile ""
$REDIS_TITLE
cluster-enabled yes
cluster-port $2
cluster-config-file nodes.conf
cluster-node-timeout $NODE_TIMEOUT_MS
repl-diskless-sync-delay 0
CONF
}

server_pids() { # port
    session_pids "$DIR/server-$1.pid"
    pids_naming "$DIR/server-$1.conf"
}

start_server() { # port
    wait_port_closed "$1"
    spawn "$DIR/server-$1.pid" "$DIR/server-$1.log" \
        env -i PATH="$SYS_PATH" "$MARK" redis-server "$DIR/server-$1.conf"
}

answers() { [ "$(rcli "$1" PING 2>/dev/null)" = PONG ]; }

info_field() { # port field
    rcli "$1" CLUSTER INFO 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

node_ok() { # port
    [ "$(info_field "$1" cluster_state)" = ok ] &&
        [ "$(info_field "$1" cluster_slots_ok)" = 16384 ] &&
        [ "$(info_field "$1" cluster_known_nodes)" = 6 ]
}

# Every node: cluster_state ok, all slots served, six nodes known; three masters with slots,
# each with a replica whose link is up.
cluster_ok() {
    local port nodes
    for port in "${PORTS[@]}"; do node_ok "$port" || return 1; done
    nodes=$(rcli "${PORTS[0]}" CLUSTER NODES 2>/dev/null) || return 1
    [ "$(awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" { n++ } END { print n + 0 }' <<<"$nodes")" = 3 ] || return 1
    # Three replicas too, as the first node sees them: `--cluster create` makes a node a replica
    # with CLUSTER REPLICATE, and until gossip carries that, the node reads as a master without
    # slots (a test asking for a master's replica then found none).
    [ "$(awk '$3 ~ /slave/ && $3 !~ /fail/ && $4 != "-" { n++ } END { print n + 0 }' <<<"$nodes")" = 3 ] || return 1
    for port in "${PORTS[@]}"; do
        if rcli "$port" ROLE 2>/dev/null | head -n 1 | grep -qx slave; then
            rcli "$port" INFO replication 2>/dev/null | tr -d '\r' | grep -qx 'master_link_status:up' || return 1
        fi
    done
}

# The node id in a stopped server's nodes.conf.
node_id() { # port
    awk '$3 ~ /myself/ { print $1 }' "$DIR/data-$1/nodes.conf" 2>/dev/null
}

# A stopped node may start again (empty) once a running node sees it as a replica or as a
# master without slots: its replica took its slots over.
safe_to_restart() { # port
    local id port line
    id=$(node_id "$1")
    [ -n "$id" ] || return 1
    for port in "${PORTS[@]}"; do
        [ "$port" = "$1" ] && continue
        line=$(rcli "$port" CLUSTER NODES 2>/dev/null | awk -v id="$id" '$1 == id') || continue
        [ -n "$line" ] || continue
        awk '$3 ~ /slave/ || $9 == "" { ok = 1 } END { exit !ok }' <<<"$line"
        return
    done
    return 1
}

running() { [ -f "$DIR/ports" ] && [ -f "$DIR/.created" ]; }

our_pids() {
    local port
    if [ -f "$DIR/ports" ]; then
        load_ports
        for port in "${PORTS[@]}"; do server_pids "$port"; done
    fi
    pids_naming "$DIR"
    grep -lszxF -- "$MARK" /proc/[0-9]*/environ | cut -d/ -f3 | grep -vx "$$" || true
}

up() {
    lock_folder "$DIR"
    if [ -d "$DIR" ] && [ ! -e "$DIR/.wallet-ledger-redis-cluster" ] && [ -n "$(ls -A "$DIR")" ]; then
        die "$DIR exists and was not made by redis-cluster.sh"
    fi
    local port
    if running; then
        load_ports
        for port in "${PORTS[@]}"; do
            [ -z "$(server_pids "$port")" ] || continue
            say "redis-server $port is stopped; waiting until its replica took over"
            wait_until 30 "the cluster to fail over $port" safe_to_restart "$port" ||
                die "$port still owns slots and no replica took them: down and up"
            say "starting redis-server $port again"
            start_server "$port"
        done
        wait_until 60 "cluster_state:ok on every node" cluster_ok || die "see the logs in $DIR"
        url
        return
    fi
    down_unlocked
    mkdir -p "$DIR"
    touch "$DIR/.wallet-ledger-redis-cluster"
    local ports
    ports=$(reserve_ports 12 "$DIR" | tr '\n' ' ')
    read -r -a all <<<"$ports"
    printf 'CLIENT_PORTS="%s"\nBUS_PORTS="%s"\n' "${all[*]:0:6}" "${all[*]:6:6}" >"$DIR/ports"
    load_ports
    say "nodes on ${PORTS[*]} (cluster bus ${BUSES[*]})"
    local i addrs=()
    for i in 0 1 2 3 4 5; do
        write_conf "${PORTS[$i]}" "${BUSES[$i]}"
        start_server "${PORTS[$i]}"
        addrs+=("127.0.0.1:${PORTS[$i]}")
    done
    for port in "${PORTS[@]}"; do
        wait_until 30 "redis-server $port" answers "$port" || die "see $DIR/server-$port.log"
    done
    env -i PATH="$SYS_PATH" redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
        </dev/null >>"$DIR/create.log" 2>&1 9>&- || die "redis-cli --cluster create failed: see $DIR/create.log"
    touch "$DIR/.created"
    wait_until 60 "cluster_state:ok on every node" cluster_ok || die "see the logs in $DIR"
    url
}

down_unlocked() {
    [ -d "$DIR" ] || { release_ports "$DIR"; return 0; }
    [ -e "$DIR/.wallet-ledger-redis-cluster" ] || die "$DIR was not made by redis-cluster.sh: not removing it"
    kill_until_gone our_pids
    if [ -f "$DIR/ports" ]; then
        load_ports
        for port in "${PORTS[@]}" "${BUSES[@]}"; do wait_port_closed "$port"; done
    fi
    rm -rf "$DIR"
    release_ports "$DIR"
}

down() {
    lock_folder "$DIR"
    down_unlocked
}

status() {
    echo "REDIS_CLUSTER_DIR=$DIR"
    if [ ! -f "$DIR/ports" ]; then
        echo "Redis Cluster: not up"
        return
    fi
    load_ports
    local port role
    for port in "${PORTS[@]}"; do
        if [ -z "$(server_pids "$port")" ]; then
            echo "  $port: stopped"
            continue
        fi
        role=$(rcli "$port" CLUSTER NODES 2>/dev/null | awk '$3 ~ /myself/ {
            r = ($3 ~ /master/) ? "master" : "replica"
            s = ""; for (i = 9; i <= NF; i++) s = s " " $i
            print r (s == "" ? "" : ", slots" s) }')
        echo "  $port: ${role:-not answering}, cluster_state:$(info_field "$port" cluster_state)"
    done
    url
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *)
        sed -n '/^# Subcommands/,/^#$/p' "$0" >&2
        exit 2
        ;;
esac
