#!/usr/bin/env bash
# High-availability PostgreSQL and Redis for tests, on loopback ports of their own, in a folder
# of their own. Never touches the machine's PostgreSQL (5432) or Redis (6379).
#
#   PostgreSQL: a pg_auto_failover monitor and two data nodes, node1 and node2 (a primary and
#   a synchronous standby), tuned to fail over in about 10 s.
#   Redis: a master, a replica and three Sentinels watching the master "payments".
#
# Subcommands (results on stdout; logs on stderr and in files in HA_DIR):
#   up [pg|redis|all]            install missing Debian packages (as root), start the parts asked
#                                for (default all), or only print their lines when already up.
#                                stdout ends with shell-sourceable lines only:
#                                  DATABASE_URL=postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/wallet_ledger?target_session_attrs=read-write
#                                  REDIS_URL=redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/payments
#   down                         kill everything of HA_DIR, wait until its ports are free, remove it
#   status                       human-readable state of both halves
#   primary                      "NODE PORT" of the node the monitor reports primary
#   kill-pg-primary              SIGKILL the primary's keeper, the keeper's supervised children and
#                                the postmaster together (a lost machine); prints the node's name
#   freeze-pg-primary            SIGSTOP the primary's keeper, its children, the postmaster and
#                                its backends (a paused VM: sockets stay open, nothing answers);
#                                prints "NODE PID..." (SIGCONT those pids to thaw it)
#   wait-pg-primary OLD [SECS]   wait until a node other than OLD is primary and accepts writes;
#                                prints "NODE PORT"; exit 1 after SECS (default 90)
#   restart-node NODE            start NODE's keeper again: it rejoins as a standby (pg_rewind)
#   wait-pg-pair [SECS]          wait until the monitor shows a primary and a healthy secondary and
#                                synchronous replication is in effect; prints the primary's
#                                "NODE PORT"; exit 1 after SECS (default 90)
#   redis-master                 the master's port, per SENTINEL get-master-addr-by-name payments
#   kill-redis-master            SIGKILL the current master's redis-server; prints its port
#   wait-redis-master OLD [SECS] wait until the Sentinels agree on a master other than OLD and it
#                                answers ROLE as master; prints its port; exit 1 after SECS (90)
#   restart-redis PORT           start the killed redis-server of PORT again, as a replica of the
#                                current master; waits until its link is up
#   freeze-redis-master          SIGSTOP the current master's redis-server (a paused VM); prints
#                                "PORT PID..." (SIGCONT those pids to thaw it)
#   wait-redis-replica PORT [SECS]
#                                wait until the server of PORT (a thawed old master) replicates
#                                the current master; exit 1 after SECS (default 90)
#
# HA_DIR (default /tmp/wallet-ledger-ha) is the folder: pg/ and redis/ each hold a `ports` file,
# logs, pid files and data. Several HA_DIRs can run side by side: ports are picked free and
# reserved in /tmp/wallet-ledger-ha.d, and every process is found by its session, its command
# line or its environment, so `down` of one folder never touches another.
#
# tests/ha (run by `cargo test`, so by CI) drives it. Measured by hand on a 2-core machine
# (with a cargo build alongside), 3 to 5 cycles in a row each: `up pg` ~8 s, `up redis` ~3 s; kill-pg-primary to
# the other node accepting writes 8-9.5 s, rejoin (restart-node + wait-pg-pair) 1.2-2.5 s, no
# acknowledged insert lost; kill-redis-master to the new master ~2.5 s, every key confirmed by
# WAIT 1 kept, restart-redis ~1 s. Known limits: pg_auto_failover promotes only a node that is
# "secondary" and healthy on the monitor when the primary is lost (it prefers losing
# availability to losing data): wait-pg-pair before killing again. A Redis failover that
# follows another within a few seconds can take ~6 s (see write_sentinel_conf).
set -euo pipefail

HA_DIR=${HA_DIR:-/tmp/wallet-ledger-ha}
case $HA_DIR in /*) ;; *) HA_DIR=$PWD/$HA_DIR ;; esac
HA_DIR=${HA_DIR%/}
PG_DIR=$HA_DIR/pg
REDIS_DIR=$HA_DIR/redis
PGBIN=/usr/lib/postgresql/15/bin
SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
NODES=(node1 node2)
# The marker in the environment of every daemon this script starts, one per half (so that
# recreating one half spares the other).
MARK_PG="WALLET_LEDGER_HA=$PG_DIR"
MARK_REDIS="WALLET_LEDGER_HA=$REDIS_DIR"
# States in which the monitor lets a node take writes (or is about to).
PRIMARY_STATES="'single','wait_primary','primary','join_primary','apply_settings'"
# Redis rewrites its process title, losing the config path of its command line: put it back.
REDIS_TITLE='proc-title-template "{title} {listen-addr} {server-mode} {config-file}"'

say() { echo "ha.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source=lib/ports.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/ports.sh"

# Folder names end up in URLs, config files and regular expressions: keep them plain.
case $HA_DIR in
    / | /tmp | /var | /home | /root | /usr | /etc) die "HA_DIR=$HA_DIR is not a folder of its own" ;;
    *[!A-Za-z0-9._/-]*) die "HA_DIR may only contain letters, digits and . _ / -" ;;
esac
# The only character of a valid HA_DIR that is special in a regular expression is the dot.
HA_DIR_RE=${HA_DIR//./\\.}
# Matches an argument that is (or starts with) the folder, or a process title naming it.
DIR_RE="(^| )$HA_DIR_RE(/| |\$)"
# as_pg as a command line, for spawn (which runs it in a new session, where functions do not
# exist). pg_autoctl refuses root; nothing of the caller's environment (PGPORT, PGDATABASE...)
# leaks in; pg_autoctl's config, state and pid files land in the folder; the marker makes every
# process findable; pg_autoctl looks for openssl along PATH, so PATH names /usr/bin; LANG makes
# initdb pick UTF8.
PG_PREFIX=(env -i PATH="$PGBIN:$SYS_PATH" LANG=C.UTF-8 HOME="$PG_DIR" "$MARK_PG"
    XDG_CONFIG_HOME="$PG_DIR/xdg/config" XDG_DATA_HOME="$PG_DIR/xdg/data" XDG_RUNTIME_DIR="$PG_DIR/xdg/run")
if [ "$(id -u)" -eq 0 ]; then
    PG_PREFIX=(setpriv --reuid=postgres --regid=postgres --init-groups "${PG_PREFIX[@]}")
fi

## Processes

# Runs a command as the postgres user, in the environment of PG_PREFIX.
as_pg() { "${PG_PREFIX[@]}" "$@" 9>&- 8>&-; }

# Starts a command in the background in a session of its own, so that nothing done to the
# caller's session or process group (a test harness ending) reaches it, and so that all of it
# (a keeper and its supervised children) can be found by session later. No descriptor of ours
# is inherited: a daemon holding the caller's stdout would make `$(ha.sh up)` hang. The pid
# file holds the session id.
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

# Whether PID belongs to this folder: its command line names the folder, or its environment
# holds the marker. PostgreSQL's and Redis's children overwrite both (process titles), so they
# are found as children of a postmaster, or by session.
is_ours() {
    grep -qszE -- "$DIR_RE" "/proc/$1/cmdline" ||
        grep -qszE -- "^WALLET_LEDGER_HA=$HA_DIR_RE/" "/proc/$1/environ"
}

# Every process of the sessions whose ids the pid files hold, when one of the session's
# processes is ours (a session id left in a stale pid file may belong to someone else now).
session_pids() { # pidfile...
    local f sid members pid
    for f in "$@"; do
        [ -s "$f" ] || continue
        sid=$(cat "$f")
        case $sid in '' | *[!0-9]*) continue ;; esac
        members=$(pgrep -s "$sid" || true)
        for pid in $members; do
            if is_ours "$pid"; then
                echo "$members"
                break
            fi
        done
    done
}

# Processes whose command line names PATH (keepers, postmasters, pg_rewind, redis-servers).
pids_naming() { # path
    local re
    re="(^| )${1//./\\.}(/| |\$)"
    grep -lszE -- "$re" /proc/[0-9]*/cmdline | cut -d/ -f3 | grep -vx "$$" || true
}

# The postmaster of PGDATA, when it runs and is ours.
postmaster_pid() { # pgdata
    local pid
    pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null || true)
    case $pid in '' | *[!0-9]*) return 0 ;; esac
    grep -qszxF -- "$1" "/proc/$pid/cmdline" && echo "$pid"
    return 0
}

# SIGKILLs what the function prints, and the children of each process, all in one go; again
# until it prints nothing (a keeper's child may start PostgreSQL between two looks).
kill_until_gone() { # function args...
    local pids
    for _ in $(seq 1 100); do
        pids=$("$@" | sort -un)
        [ -z "$pids" ] && return 0
        # Children first looked up, then everything killed at once: a postmaster's children
        # are reparented (and unrecognisable) once it is gone.
        # shellcheck disable=SC2046,SC2086
        kill -9 $pids $(for p in $pids; do pgrep -P "$p"; done) 2>/dev/null || true
        sleep 0.1
    done
    say "could not kill: $pids"
    return 1
}

listening() { # port
    [ -n "$(ss -Hltn "( sport = :$1 )")" ]
}

wait_port_closed() { # port
    for _ in $(seq 1 100); do
        listening "$1" || return 0
        sleep 0.1
    done
    die "port $1 is still in use"
}

## Ports: scripts/lib/ports.sh

## Packages

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Installs the Debian packages of the halves asked for, when missing.
ensure_packages() { # package...
    local missing=() pkg
    for pkg in "$@"; do installed "$pkg" || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "missing packages; as root run: apt-get update -qq && apt-get install -y ${missing[*]}"
        exit 1
    fi
    say "installing ${missing[*]}"
    # No systemd here: without a policy, the packages' scripts would start their default
    # services (a PostgreSQL cluster, redis-server on 6379, a Sentinel on 26379) next to the
    # machine's shared ones.
    local policy=/usr/sbin/policy-rc.d added=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
    fi
    local rc=0
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >&2 9>&- || rc=$?
    [ -n "$added" ] && rm -f "$policy"
    [ "$rc" -eq 0 ] || die "apt-get failed ($rc)"
}

## PostgreSQL half

pgsql() { # port database sql: one query as postgres, unaligned output
    timeout 20 env -i PATH="$SYS_PATH" LANG=C.UTF-8 PGCONNECT_TIMEOUT=3 \
        "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3"
}

load_pg_ports() {
    [ -f "$PG_DIR/ports" ] || die "PostgreSQL is not up in $HA_DIR"
    # shellcheck disable=SC1091
    . "$PG_DIR/ports"
}

monitor_sql() { pgsql "$MONITOR_PORT" pg_auto_failover "$1"; }

node_port() { # node
    local var="${1^^}_PORT"
    echo "${!var}"
}

pg_url() {
    echo "DATABASE_URL=postgres://postgres@127.0.0.1:$NODE1_PORT,127.0.0.1:$NODE2_PORT/wallet_ledger?target_session_attrs=read-write"
}

# "NODE PORT" of the node the monitor lets take writes, or nothing (say, mid-failover).
pg_primary() {
    monitor_sql "select nodename || ' ' || nodeport from pgautofailover.node
                 where reportedstate in ($PRIMARY_STATES) and goalstate in ($PRIMARY_STATES)
                 order by nodeid limit 1" 2>/dev/null || true
}

accepts_writes() { # port
    [ "$(pgsql "$1" postgres "select not pg_is_in_recovery()
            and not current_setting('transaction_read_only')::bool" 2>/dev/null)" = t ]
}

# Settings for a 2-core machine: pg_autoctl's auto-tuning gives each instance ~6 GB of
# shared_buffers. postgresql.conf includes pg_autoctl's files on its first line: later lines win.
small_settings() { # pgdata
    cat >>"$1/postgresql.conf" <<'CONF'
# wallet-ledger scripts/ha.sh
shared_buffers = 128MB
effective_cache_size = 512MB
maintenance_work_mem = 64MB
work_mem = 4MB
max_connections = 100
wal_keep_size = 512MB
CONF
}

# Fail over in ~10 s instead of the defaults' ~50 s (20 s until unhealthy, 30 s of demote
# timeout). The GUCs are pgautofailover.*: other prefixes (pg_auto_failover.*, as an older note
# had them) are accepted silently as placeholders and change nothing, hence the check after
# start. A dead node refuses connections at once, so a longer health_check_timeout costs
# nothing there and keeps a node busy on 2 cores from being marked unhealthy.
MONITOR_GUCS=(
    pgautofailover.health_check_period=1000
    pgautofailover.health_check_timeout=2000
    pgautofailover.health_check_max_retries=2
    pgautofailover.health_check_retry_delay=500
    pgautofailover.node_considered_unhealthy_timeout=3000
    pgautofailover.primary_demote_timeout=5000
    pgautofailover.startup_grace_period=5000
)

check_monitor_gucs() {
    local guc name value actual
    for guc in "${MONITOR_GUCS[@]}"; do
        name=${guc%%=*} value=${guc#*=}
        actual=$(monitor_sql "select setting from pg_settings where name = '$name'")
        [ "$actual" = "$value" ] || die "monitor: $name is '$actual', not $value"
    done
}

keeper_pids() { session_pids "$PG_DIR/$1.pid"; }

# Everything of a node: its keeper's session (the supervised children that restart PostgreSQL
# share it), its postmaster and whatever names its folder. The postmaster's children each
# start a session of their own, so they come as its children in kill_until_gone.
node_pids() { # node
    keeper_pids "$1"
    postmaster_pid "$PG_DIR/$1"
    pids_naming "$PG_DIR/$1"
}

run_keeper() { # monitor|node1|node2
    # A keeper killed with SIGKILL leaves its pid files; a reused pid in them would make
    # pg_autoctl or PostgreSQL believe another instance runs.
    [ -n "$(node_pids "$1")" ] && die "$1 is already running"
    rm -f "$PG_DIR/$1/postmaster.pid"
    find "$PG_DIR/xdg/run" -path "*$PG_DIR/$1/pg_autoctl.pid" -delete 2>/dev/null || true
    spawn "$PG_DIR/$1.pid" "$PG_DIR/$1.log" "${PG_PREFIX[@]}" pg_autoctl run --pgdata "$PG_DIR/$1"
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

node_reports() { # node state
    [ "$(monitor_sql "select reportedstate || '/' || goalstate from pgautofailover.node
                      where nodename = '$1'" 2>/dev/null)" = "$2/$2" ]
}

# A primary and a secondary, both healthy for the monitor (its health checks reach them), and
# the primary replicating synchronously. Only then will the monitor promote the secondary when
# the primary is lost.
pg_pair_ok() {
    local counts primary
    counts=$(monitor_sql "select count(*) filter (where reportedstate = 'primary' and goalstate = 'primary' and health = 1)
                          || '/' || count(*) filter (where reportedstate = 'secondary' and goalstate = 'secondary' and health = 1)
                          || '/' || count(*) from pgautofailover.node" 2>/dev/null) || return 1
    [ "$counts" = 1/1/2 ] || return 1
    primary=$(pg_primary)
    [ -n "$primary" ] || return 1
    [ "$(pgsql "${primary#* }" postgres "select current_setting('synchronous_standby_names') <> ''
            and exists (select 1 from pg_stat_replication
                        where state = 'streaming' and sync_state in ('sync', 'quorum'))" 2>/dev/null)" = t ]
}

wait_pg_pair() { # seconds
    if ! wait_until "$1" "a primary and a synchronous secondary" pg_pair_ok; then
        as_pg pg_autoctl show state --pgdata "$PG_DIR/monitor" >&2 2>/dev/null || true
        return 1
    fi
}

pg_running() { [ -f "$PG_DIR/ports" ] && [ -n "$(keeper_pids monitor)" ]; }

pg_down() {
    [ -d "$PG_DIR" ] || return 0
    kill_until_gone pg_pids
    if [ -f "$PG_DIR/ports" ]; then
        load_pg_ports
        for port in "$MONITOR_PORT" "$NODE1_PORT" "$NODE2_PORT"; do wait_port_closed "$port"; done
    fi
    rm -rf "$PG_DIR"
    release_ports "$HA_DIR pg"
}

pg_pids() {
    local name
    for name in monitor "${NODES[@]}"; do node_pids "$name"; done
    pids_naming "$PG_DIR"
    grep -lszxF -- "$MARK_PG" /proc/[0-9]*/environ | cut -d/ -f3 | grep -vx "$$" || true
}

create_database() {
    local primary
    primary=$(pg_primary)
    [ -n "$primary" ] || die "no primary"
    if [ -z "$(pgsql "${primary#* }" postgres "select 1 from pg_database where datname = 'wallet_ledger'")" ]; then
        say "creating database wallet_ledger on ${primary% *}"
        pgsql "${primary#* }" postgres "create database wallet_ledger" >/dev/null
    fi
}

pg_up() {
    if pg_running; then
        load_pg_ports
        for node in "${NODES[@]}"; do
            [ -n "$(node_pids "$node")" ] || { say "starting $node's keeper again"; run_keeper "$node"; }
        done
        wait_pg_pair 180
        create_database
        pg_url
        return
    fi
    pg_down
    mkdir -p "$PG_DIR/xdg/config" "$PG_DIR/xdg/data" "$PG_DIR/xdg/run"
    chmod 700 "$PG_DIR/xdg/run"
    local ports
    ports=$(reserve_ports 3 "$HA_DIR pg" | tr '\n' ' ')
    read -r MONITOR_PORT NODE1_PORT NODE2_PORT <<<"$ports"
    printf 'MONITOR_PORT=%s\nNODE1_PORT=%s\nNODE2_PORT=%s\n' "$MONITOR_PORT" "$NODE1_PORT" "$NODE2_PORT" >"$PG_DIR/ports"
    [ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$PG_DIR"
    local common=(--auth trust --ssl-self-signed --hostname 127.0.0.1 --pgctl "$PGBIN/pg_ctl")

    say "monitor on $MONITOR_PORT"
    as_pg pg_autoctl create monitor --pgdata "$PG_DIR/monitor" --pgport "$MONITOR_PORT" "${common[@]}" \
        >>"$PG_DIR/monitor.log" 2>&1 || die "pg_autoctl create monitor failed: see $PG_DIR/monitor.log"
    # The monitor has no --listen: without this it listens on every address.
    as_pg pg_autoctl config set --pgdata "$PG_DIR/monitor" postgresql.listen_addresses 127.0.0.1 \
        >>"$PG_DIR/monitor.log" 2>&1
    small_settings "$PG_DIR/monitor"
    printf '%s\n' "${MONITOR_GUCS[@]}" >>"$PG_DIR/monitor/postgresql.conf"
    # `create monitor` can leave its PostgreSQL running, which `run` then fails to restart.
    as_pg "$PGBIN/pg_ctl" -D "$PG_DIR/monitor" -m fast -w stop >>"$PG_DIR/monitor.log" 2>&1 || true
    run_keeper monitor
    wait_until 60 "the monitor" monitor_sql "select 1" >/dev/null 2>&1 || die "see $PG_DIR/monitor.log"
    check_monitor_gucs

    local monitor="postgres://autoctl_node@127.0.0.1:$MONITOR_PORT/pg_auto_failover?sslmode=require"
    for node in "${NODES[@]}"; do
        say "$node on $(node_port "$node")"
        as_pg pg_autoctl create postgres --pgdata "$PG_DIR/$node" --pgport "$(node_port "$node")" \
            --listen 127.0.0.1 --name "$node" --monitor "$monitor" "${common[@]}" \
            >>"$PG_DIR/$node.log" 2>&1 || die "pg_autoctl create postgres failed: see $PG_DIR/$node.log"
        small_settings "$PG_DIR/$node"
        # A primary cut off from the monitor and its standby demotes itself after this; keep
        # it below primary_demote_timeout (5 s), after which the monitor promotes the other.
        as_pg pg_autoctl config set --pgdata "$PG_DIR/$node" timeout.network_partition_timeout 3 \
            >>"$PG_DIR/$node.log" 2>&1
        run_keeper "$node"
        # node1 must be the primary ("single") before node2 registers, or either may win.
        if [ "$node" = node1 ]; then
            wait_until 60 "node1 to be single" node_reports node1 single || die "see $PG_DIR/node1.log"
        fi
    done
    wait_pg_pair 180 || die "see the logs in $PG_DIR"
    create_database
    pg_url
}

pg_wait_primary() { # old-node seconds
    local old=$1 deadline=$((SECONDS + ${2:-90})) primary
    load_pg_ports
    while [ "$SECONDS" -lt "$deadline" ]; do
        primary=$(pg_primary)
        if [ -n "$primary" ] && [ "${primary% *}" != "$old" ] && accepts_writes "${primary#* }"; then
            echo "$primary"
            return 0
        fi
        sleep 0.2
    done
    say "no node other than $old became a writable primary within ${2:-90}s"
    as_pg pg_autoctl show state --pgdata "$PG_DIR/monitor" >&2 2>/dev/null || true
    exit 1
}

# Stops the primary node's processes without ending them: its kernel keeps accepting and
# acknowledging on its sockets, which is what a client cannot tell from a slow server.
freeze_pg_primary() {
    local primary node pids children frozen=""
    load_pg_ports
    primary=$(pg_primary)
    [ -n "$primary" ] || die "the monitor reports no primary"
    node=${primary% *}
    # The parents first, so that none forks a child after its children were looked up; then
    # their children (backends, supervised keepers), until no new one shows.
    pids=$(node_pids "$node" | sort -un)
    for _ in 1 2 3; do
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086
        kill -STOP $pids 2>/dev/null || true
        frozen="$frozen $pids"
        children=$(for p in $frozen; do pgrep -P "$p" || true; done | sort -u)
        pids=$(comm -23 <(echo "$children") <(echo "$frozen" | tr ' ' '\n' | sort -u) | grep . || true)
    done
    echo "$node$(echo "$frozen" | tr '\n' ' ' | tr -s ' ')"
}

kill_pg_primary() {
    local primary node port
    load_pg_ports
    primary=$(pg_primary)
    [ -n "$primary" ] || die "the monitor reports no primary"
    node=${primary% *} port=${primary#* }
    # Everything of the node at once: a postmaster killed alone is restarted in place by its
    # keeper within a second (not a failover), and a keeper killed alone leaves its supervised
    # children, which restart PostgreSQL.
    kill_until_gone node_pids "$node"
    wait_port_closed "$port"
    sleep 1
    if [ -n "$(node_pids "$node")" ] || listening "$port"; then
        die "$node came back after the kill"
    fi
    echo "$node"
}

restart_node() { # node
    local node=${1:-}
    case " ${NODES[*]} " in *" $node "*) ;; *) die "usage: $0 restart-node node1|node2" ;; esac
    load_pg_ports
    [ -d "$PG_DIR/$node" ] || die "$node does not exist"
    run_keeper "$node"
    say "$node's keeper started; wait-pg-pair waits until it is secondary again"
}

pg_status() {
    if [ ! -f "$PG_DIR/ports" ]; then
        echo "PostgreSQL: not up"
        return
    fi
    load_pg_ports
    echo "PostgreSQL (pg_auto_failover monitor on 127.0.0.1:$MONITOR_PORT):"
    local name
    for name in monitor "${NODES[@]}"; do
        if [ -n "$(keeper_pids "$name")" ]; then
            echo "  $name: keeper running (session $(cat "$PG_DIR/$name.pid"))"
        else
            echo "  $name: keeper not running"
        fi
    done
    as_pg pg_autoctl show state --pgdata "$PG_DIR/monitor" 2>/dev/null || echo "  the monitor does not answer"
    local primary
    primary=$(pg_primary)
    echo "  primary: ${primary:-none}"
    pg_url
}

## Redis half

rcli() { # port command...
    timeout 5 env -i PATH="$SYS_PATH" redis-cli -h 127.0.0.1 -p "$@"
}

load_redis_ports() {
    [ -f "$REDIS_DIR/ports" ] || die "Redis is not up in $HA_DIR"
    # shellcheck disable=SC1091
    . "$REDIS_DIR/ports"
    SERVERS=("$REDIS_A_PORT" "$REDIS_B_PORT")
    SENTINELS=("$SENTINEL1_PORT" "$SENTINEL2_PORT" "$SENTINEL3_PORT")
}

redis_url() {
    echo "REDIS_URL=redis+sentinel://127.0.0.1:$SENTINEL1_PORT,127.0.0.1:$SENTINEL2_PORT,127.0.0.1:$SENTINEL3_PORT/payments"
}

write_server_conf() { # port [master-port]
    mkdir -p "$REDIS_DIR/data-$1"
    {
        echo "port $1"
        echo "bind 127.0.0.1"
        echo "daemonize no"
        echo "dir $REDIS_DIR/data-$1"
        echo 'save ""'
        echo "appendonly no"
        # A (re)joining replica gets its full sync at once, not after the default 5 s wait
        # for more replicas.
        echo "repl-diskless-sync-delay 0"
        echo 'logfile ""'
        echo "$REDIS_TITLE"
        [ -n "${2:-}" ] && echo "replicaof 127.0.0.1 $2"
    } >"$REDIS_DIR/server-$1.conf"
}

# Each Sentinel rewrites its own config file (its id, the other Sentinels, failovers).
# failover-timeout: a Sentinel that started a failover of a master does not start another one
# for 2x this. Right after a promotion, a Sentinel of a loaded machine sometimes takes the new
# master for down for a moment, starts a failover and aborts it (no replica yet): a real
# failure in the next 2x failover-timeout then waits that long (10 s with 5000, 6 s here).
write_sentinel_conf() { # port master-port
    cat >"$REDIS_DIR/sentinel-$1.conf" <<CONF
port $1
bind 127.0.0.1
daemonize no
dir $REDIS_DIR
logfile ""
$REDIS_TITLE
sentinel resolve-hostnames no
sentinel announce-hostnames no
sentinel announce-ip 127.0.0.1
sentinel monitor payments 127.0.0.1 $2 2
sentinel down-after-milliseconds payments 1000
sentinel failover-timeout payments 3000
sentinel parallel-syncs payments 1
CONF
}

server_pids() { # port
    session_pids "$REDIS_DIR/server-$1.pid"
    pids_naming "$REDIS_DIR/server-$1.conf"
}

sentinel_pids() { # port
    session_pids "$REDIS_DIR/sentinel-$1.pid"
    pids_naming "$REDIS_DIR/sentinel-$1.conf"
}

start_server() { # port
    wait_port_closed "$1"
    spawn "$REDIS_DIR/server-$1.pid" "$REDIS_DIR/server-$1.log" \
        env -i PATH="$SYS_PATH" "$MARK_REDIS" redis-server "$REDIS_DIR/server-$1.conf"
}

start_sentinel() { # port
    wait_port_closed "$1"
    spawn "$REDIS_DIR/sentinel-$1.pid" "$REDIS_DIR/sentinel-$1.log" \
        env -i PATH="$SYS_PATH" "$MARK_REDIS" redis-sentinel "$REDIS_DIR/sentinel-$1.conf"
}

# The master port one Sentinel reports, or nothing.
sentinel_master() { # sentinel-port
    rcli "$1" SENTINEL get-master-addr-by-name payments 2>/dev/null | sed -n 2p || true
}

# The master port most Sentinels (2 of 3) agree on, or nothing.
majority_master() {
    local s
    for s in "${SENTINELS[@]}"; do sentinel_master "$s"; done | sort | uniq -c |
        awk '$1 >= 2 && $2 != "" { print $2 }' | head -n 1
}

# The value of FIELD in a flat key/value reply (redis-cli prints one element per line).
field() { awk -v k="$1" 'NR % 2 == 1 { key = $0; next } key == k { print; exit }'; }

role_of() { rcli "$1" ROLE 2>/dev/null | head -n 1 || true; }

replica_link_up() { # port master-port
    local info
    info=$(rcli "$1" INFO replication 2>/dev/null | tr -d '\r') || return 1
    grep -qx 'role:slave' <<<"$info" && grep -qx "master_port:$2" <<<"$info" &&
        grep -qx 'master_link_status:up' <<<"$info"
}

# One Sentinel sees MASTER as the master, the two other Sentinels, and REPLICA as a replica
# that is not down and whose link to the master is up.
sentinel_sees() { # sentinel-port master-port replica-port
    local master
    [ "$(sentinel_master "$1")" = "$2" ] || return 1
    master=$(rcli "$1" SENTINEL master payments 2>/dev/null) || return 1
    [ "$(field flags <<<"$master")" = master ] || return 1
    [ "$(field num-other-sentinels <<<"$master")" = 2 ] || return 1
    rcli "$1" SENTINEL replicas payments 2>/dev/null | awk -v want="$3" '
        NR % 2 == 1 { key = $0; next }
        key == "port" { port = $0 }
        key == "flags" { flags = $0 }
        key == "master-link-status" && port == want && flags == "slave" && $0 == "ok" { found = 1 }
        END { exit !found }'
}

redis_pair_ok() {
    local master replica s
    master=$(majority_master)
    [ -n "$master" ] && [ "$(role_of "$master")" = master ] || return 1
    for s in "${SERVERS[@]}"; do
        if [ "$s" != "$master" ]; then replica=$s; fi
    done
    replica_link_up "$replica" "$master" || return 1
    for s in "${SENTINELS[@]}"; do sentinel_sees "$s" "$master" "$replica" || return 1; done
}

redis_running() { [ -f "$REDIS_DIR/ports" ] && [ -n "$(session_pids "$REDIS_DIR"/sentinel-*.pid)" ]; }

redis_pids() {
    local port
    for port in "${SERVERS[@]}"; do server_pids "$port"; done
    for port in "${SENTINELS[@]}"; do sentinel_pids "$port"; done
    pids_naming "$REDIS_DIR"
    grep -lszxF -- "$MARK_REDIS" /proc/[0-9]*/environ | cut -d/ -f3 | grep -vx "$$" || true
}

redis_down() {
    [ -d "$REDIS_DIR" ] || return 0
    if [ -f "$REDIS_DIR/ports" ]; then
        load_redis_ports
        kill_until_gone redis_pids
        for port in "${SERVERS[@]}" "${SENTINELS[@]}"; do wait_port_closed "$port"; done
    fi
    kill_until_gone pids_naming "$REDIS_DIR"
    rm -rf "$REDIS_DIR"
    release_ports "$HA_DIR redis"
}

# Starts the stopped server of PORT as a replica of the master the Sentinels agree on. Never
# as a master: it comes back empty (no persistence), and a Sentinel still taking it for the
# master would keep it, and the empty data set would replicate.
restart_server() { # port seconds
    local port=$1 master deadline=$((SECONDS + $2))
    while :; do
        master=$(majority_master)
        [ -n "$master" ] && [ "$master" != "$port" ] && [ "$(role_of "$master")" = master ] && break
        [ "$SECONDS" -lt "$deadline" ] || die "no master other than $port to replicate from"
        sleep 0.2
    done
    say "starting redis-server $port as a replica of $master"
    write_server_conf "$port" "$master"
    start_server "$port"
    wait_until $((deadline > SECONDS ? deadline - SECONDS : 1)) "redis $port to replicate $master" \
        redis_replica_ready "$port" "$master"
}

# The server replicates (link up) and no Sentinel takes it for down any more.
redis_replica_ready() { # port master-port
    local s
    replica_link_up "$1" "$2" || return 1
    for s in "${SENTINELS[@]}"; do
        rcli "$s" SENTINEL replicas payments 2>/dev/null | awk -v want="$1" '
            NR % 2 == 1 { key = $0; next }
            key == "port" { port = $0 }
            key == "flags" && port == want && $0 == "slave" { found = 1 }
            END { exit !found }' || return 1
    done
}

redis_up() {
    if redis_running; then
        load_redis_ports
        local port
        for port in "${SENTINELS[@]}"; do
            [ -n "$(sentinel_pids "$port")" ] || { say "starting sentinel $port again"; start_sentinel "$port"; }
        done
        for port in "${SERVERS[@]}"; do
            [ -n "$(server_pids "$port")" ] || restart_server "$port" 60
        done
        wait_until 60 "the Sentinels to see a master and its replica" redis_pair_ok || die "see $REDIS_DIR"
        redis_url
        return
    fi
    redis_down
    mkdir -p "$REDIS_DIR"
    local ports
    ports=$(reserve_ports 5 "$HA_DIR redis" | tr '\n' ' ')
    read -r REDIS_A_PORT REDIS_B_PORT SENTINEL1_PORT SENTINEL2_PORT SENTINEL3_PORT <<<"$ports"
    printf 'REDIS_A_PORT=%s\nREDIS_B_PORT=%s\nSENTINEL1_PORT=%s\nSENTINEL2_PORT=%s\nSENTINEL3_PORT=%s\n' \
        "$REDIS_A_PORT" "$REDIS_B_PORT" "$SENTINEL1_PORT" "$SENTINEL2_PORT" "$SENTINEL3_PORT" >"$REDIS_DIR/ports"
    load_redis_ports
    say "redis master on $REDIS_A_PORT, replica on $REDIS_B_PORT, sentinels on ${SENTINELS[*]}"
    write_server_conf "$REDIS_A_PORT"
    write_server_conf "$REDIS_B_PORT" "$REDIS_A_PORT"
    start_server "$REDIS_A_PORT"
    start_server "$REDIS_B_PORT"
    local s
    for s in "${SENTINELS[@]}"; do
        write_sentinel_conf "$s" "$REDIS_A_PORT"
        start_sentinel "$s"
    done
    wait_until 60 "the Sentinels to see the master, the replica and each other" redis_pair_ok ||
        die "see the logs in $REDIS_DIR"
    redis_url
}

redis_master() {
    local s port
    load_redis_ports
    for s in "${SENTINELS[@]}"; do
        port=$(sentinel_master "$s")
        [ -n "$port" ] && { echo "$port"; return 0; }
    done
    die "no Sentinel answers"
}

kill_redis_master() {
    local port
    load_redis_ports
    port=$(redis_master)
    case " ${SERVERS[*]} " in *" $port "*) ;; *) die "master $port is not one of ours" ;; esac
    kill_until_gone server_pids "$port"
    wait_port_closed "$port"
    echo "$port"
}

# SIGSTOPs the current master's redis-server (a paused VM: its socket stays open, nothing
# answers); prints "PORT PID..." (SIGCONT those pids to thaw it).
freeze_redis_master() {
    local port pids
    load_redis_ports
    port=$(redis_master)
    case " ${SERVERS[*]} " in *" $port "*) ;; *) die "master $port is not one of ours" ;; esac
    pids=$(server_pids "$port" | sort -un)
    [ -n "$pids" ] || die "no redis-server runs on $port"
    # shellcheck disable=SC2086
    kill -STOP $pids
    echo "$port" $pids
}

# Waits until the server of PORT (a thawed old master) replicates the master the Sentinels
# agree on: they turn a master that comes back after a failover into a replica.
redis_wait_replica() { # port seconds
    local port=$1 deadline=$((SECONDS + ${2:-90})) master
    load_redis_ports
    while [ "$SECONDS" -lt "$deadline" ]; do
        master=$(majority_master)
        if [ -n "$master" ] && [ "$master" != "$port" ] && redis_replica_ready "$port" "$master"; then
            return 0
        fi
        sleep 0.2
    done
    die "redis $port did not become a replica within ${2:-90}s"
}

redis_wait_master() { # old-port seconds
    local old=$1 deadline=$((SECONDS + ${2:-90})) master
    load_redis_ports
    while [ "$SECONDS" -lt "$deadline" ]; do
        master=$(majority_master)
        if [ -n "$master" ] && [ "$master" != "$old" ] && [ "$(role_of "$master")" = master ]; then
            echo "$master"
            return 0
        fi
        sleep 0.2
    done
    die "the Sentinels did not agree on a master other than $old within ${2:-90}s"
}

restart_redis() { # port
    local port=${1:-}
    load_redis_ports
    case " ${SERVERS[*]} " in *" $port "*) ;; *) die "usage: $0 restart-redis ${SERVERS[*]}" ;; esac
    [ -z "$(server_pids "$port")" ] || die "redis-server $port is running"
    restart_server "$port" 90
}

redis_status() {
    if [ ! -f "$REDIS_DIR/ports" ]; then
        echo "Redis: not up"
        return
    fi
    load_redis_ports
    echo "Redis (Sentinel master name payments):"
    local port info
    for port in "${SENTINELS[@]}"; do
        info=$(rcli "$port" SENTINEL master payments 2>/dev/null) || { echo "  sentinel $port: down"; continue; }
        echo "  sentinel $port: master $(sentinel_master "$port") ($(field flags <<<"$info")," \
            "other sentinels $(field num-other-sentinels <<<"$info"), replicas $(field num-slaves <<<"$info"))"
    done
    for port in "${SERVERS[@]}"; do
        echo "  redis-server $port: $(role_of "$port" | grep . || echo down)"
    done
    redis_url
}

## Main

down() {
    lock_folder "$HA_DIR"
    [ -d "$HA_DIR" ] || { release_ports "$HA_DIR"; return 0; }
    [ -e "$HA_DIR/.wallet-ledger-ha" ] || die "$HA_DIR was not made by ha.sh: not removing it"
    pg_down
    redis_down
    kill_until_gone pids_naming "$HA_DIR"
    rm -rf "$HA_DIR"
    release_ports "$HA_DIR"
}

up() { # pg|redis|all
    local what=${1:-all}
    case $what in pg | redis | all) ;; *) die "usage: $0 up [pg|redis|all]" ;; esac
    local packages=()
    case $what in pg | all) packages+=(postgresql-15-auto-failover) ;; esac
    case $what in redis | all) packages+=(redis-server redis-sentinel) ;; esac
    ensure_packages "${packages[@]}"
    lock_folder "$HA_DIR"
    if [ -d "$HA_DIR" ] && [ ! -e "$HA_DIR/.wallet-ledger-ha" ] && [ -n "$(ls -A "$HA_DIR")" ]; then
        die "$HA_DIR exists and was not made by ha.sh"
    fi
    mkdir -p "$HA_DIR"
    chmod 755 "$HA_DIR"
    touch "$HA_DIR/.wallet-ledger-ha"
    # Each half runs in a command substitution: whatever it prints, only its last line (the
    # URL) reaches stdout, and a daemon that kept stdout would show up as a hang here.
    local pg_line='' redis_line=''
    case $what in pg | all) pg_line=$(pg_up | tail -n 1) ;; esac
    case $what in redis | all) redis_line=$(redis_up | tail -n 1) ;; esac
    [ -z "$pg_line" ] || echo "$pg_line"
    [ -z "$redis_line" ] || echo "$redis_line"
}

case "${1:-}" in
    up) up "${2:-all}" ;;
    down) down ;;
    status)
        echo "HA_DIR=$HA_DIR"
        pg_status
        redis_status
        ;;
    primary)
        load_pg_ports
        primary=$(pg_primary)
        [ -n "$primary" ] || die "the monitor reports no primary"
        echo "$primary"
        ;;
    kill-pg-primary) lock_folder "$HA_DIR" && kill_pg_primary ;;
    freeze-pg-primary) lock_folder "$HA_DIR" && freeze_pg_primary ;;
    wait-pg-primary) [ -n "${2:-}" ] || die "usage: $0 wait-pg-primary OLD_NODE [SECONDS]"; pg_wait_primary "$2" "${3:-90}" ;;
    restart-node) lock_folder "$HA_DIR" && restart_node "${2:-}" ;;
    wait-pg-pair)
        load_pg_ports
        wait_pg_pair "${2:-90}" || exit 1
        pg_primary
        ;;
    redis-master) redis_master ;;
    kill-redis-master) lock_folder "$HA_DIR" && kill_redis_master ;;
    wait-redis-master) [ -n "${2:-}" ] || die "usage: $0 wait-redis-master OLD_PORT [SECONDS]"; redis_wait_master "$2" "${3:-90}" ;;
    restart-redis) lock_folder "$HA_DIR" && restart_redis "${2:-}" ;;
    freeze-redis-master) lock_folder "$HA_DIR" && freeze_redis_master ;;
    wait-redis-replica) [ -n "${2:-}" ] || die "usage: $0 wait-redis-replica PORT [SECONDS]"; redis_wait_replica "$2" "${3:-90}" ;;
    *)
        sed -n '/^# Subcommands/,/^#$/p' "$0" >&2
        exit 2
        ;;
esac
