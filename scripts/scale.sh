#!/usr/bin/env bash
# How throughput grows with Citus workers, on one machine: every database node gets the same
# CPU quota (cgroup v1), so adding nodes adds capacity as it would on separate machines.
#
#   scripts/scale.sh [--node-cpu 0.3] [--workers 1,2,4] [--requests 1500] [--connections 16]
#                    [--accounts 1000] [--payments 3000] [--bin target/release/wallet-ledger]
#                    [--shard-count N] [-- BENCH_ARGS...]
#
# --shard-count sets citus.shard_count on each cluster's coordinator before `migrate`
# distributes the ledger's tables (default: Citus's, 32); docs/scaling.md, "How many shards".
#
# BENCH_ARGS go to every `bench` run, e.g. `-- --redis-url redis+cluster://127.0.0.1:7000
# --consumer-partitions 8` for the consumer on a Redis Cluster (scripts/redis-cluster.sh up).
#
# For the baseline and then each worker count, it starts a cluster with scripts/citus.sh in a
# folder of its own, puts each node's postmaster and its processes in a cpu and a cpuacct cgroup
# of its own (quota = node-cpu × period; backends forked later inherit it), runs `wallet-ledger
# bench api-transfers` (random wallets) and `bench consumer` against it, and prints one JSON
# line per size: transfers/s, messages/s, each node's CPU per transfer and per message (from
# cpuacct.usage) and how many periods it was throttled in (cpu.stat nr_throttled), and the
# quota. The baseline is one PostgreSQL under the same quota: the coordinator of a one-worker
# cluster, with a bench database that has no citus extension (so `migrate` sees plain
# PostgreSQL and the worker stays idle), the same configuration as the cluster's nodes.
#
# The service (`serve` and `consume` children of bench) and the load client are not capped:
# they share the rest of the machine's CPU. A node whose nr_throttled stays near zero was not
# the limit; the JSON line carries the service's CPU share as bench reports it, so a run where
# the service, not the nodes, was the wall shows itself. Needs root (cgroups, and citus.sh
# runs PostgreSQL as the postgres user).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
NODE_CPU=0.3
WORKER_COUNTS=1,2,4
REQUESTS=1500
CONNECTIONS=16
ACCOUNTS=1000
PAYMENTS=3000
BIN=$REPO/target/release/wallet-ledger
SHARD_COUNT=
BENCH_ARGS=()
CPU_ROOT=/sys/fs/cgroup/cpu
ACCT_ROOT=/sys/fs/cgroup/cpuacct
PERIOD_US=100000

say() { echo "scale.sh: $*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
        --node-cpu) NODE_CPU=$2; shift 2 ;;
        --workers) WORKER_COUNTS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --connections) CONNECTIONS=$2; shift 2 ;;
        --accounts) ACCOUNTS=$2; shift 2 ;;
        --payments) PAYMENTS=$2; shift 2 ;;
        --bin) BIN=$2; shift 2 ;;
        --shard-count) SHARD_COUNT=$2; shift 2 ;;
        --) shift; BENCH_ARGS=("$@"); break ;;
        *) die "unknown argument $1 (see the head of $0)" ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "needs root: it writes cgroups"
[ -w "$CPU_ROOT" ] && [ -w "$ACCT_ROOT" ] || die "cgroup v1 cpu and cpuacct controllers not writable"
[ -x "$BIN" ] || die "$BIN missing: cargo build --release"
QUOTA_US=$(python3 -c "print(int(float('$NODE_CPU') * $PERIOD_US))")
[ "$QUOTA_US" -ge 1000 ] || die "--node-cpu $NODE_CPU is below 0.01"

WORK=$(mktemp -d /tmp/wl-scale.XXXXXX)
chmod 755 "$WORK" # the nodes run as the postgres user
GROUPS_MADE=()
CLUSTER_DIR=

cleanup() {
    [ -z "$CLUSTER_DIR" ] || CITUS_DIR=$CLUSTER_DIR bash "$REPO/scripts/citus.sh" down >/dev/null 2>&1 || true
    local group
    for group in "${GROUPS_MADE[@]}"; do
        rmdir "$CPU_ROOT/$group" "$ACCT_ROOT/$group" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Moves the postmaster of data folder $2 and every process it started into group $1, capped.
cap_node() { # group datadir
    local group=$1 pid child
    mkdir -p "$CPU_ROOT/$group" "$ACCT_ROOT/$group"
    GROUPS_MADE+=("$group")
    echo "$PERIOD_US" >"$CPU_ROOT/$group/cpu.cfs_period_us"
    echo "$QUOTA_US" >"$CPU_ROOT/$group/cpu.cfs_quota_us"
    pid=$(head -n 1 "$2/postmaster.pid")
    for child in "$pid" $(ps -o pid= --ppid "$pid"); do
        echo "$child" >"$CPU_ROOT/$group/cgroup.procs"
        echo "$child" >"$ACCT_ROOT/$group/cgroup.procs"
    done
}

usage_ns() { cat "$ACCT_ROOT/$1/cpuacct.usage"; }
throttled() { awk '$1 == "nr_throttled" { print $2 }' "$CPU_ROOT/$1/cpu.stat"; }

# One bench scenario; its JSON line (stdout), with every node's CPU and throttling over its
# measured phase only: from bench's "running" (api-transfers) or "consuming" (consumer) log
# line, after the wallets were created and funded, to its end.
measure() { # label scenario database_url citus_workers nodes...
    local label=$1 scenario=$2 url=$3 workers=$4 node
    shift 4
    local args=(bench "$scenario" --bench-database-url "$url" --results /dev/null
        --requests "$REQUESTS" --connections "$CONNECTIONS" --accounts "$ACCOUNTS"
        --consumer-payments "$PAYMENTS" "${BENCH_ARGS[@]}")
    [ -z "$workers" ] || args+=(--citus-workers "$workers")
    local out=$WORK/$label-$scenario.out log=$WORK/$label-$scenario.log bench
    "$BIN" "${args[@]}" >"$out" 2>"$log" &
    bench=$!
    until grep -qE ': (running|consuming) ' "$log"; do
        kill -0 "$bench" 2>/dev/null || break
        sleep 0.05
    done
    local -A before_ns before_thr
    for node in "$@"; do before_ns[$node]=$(usage_ns "$node"); before_thr[$node]=$(throttled "$node"); done
    wait "$bench" || die "bench $scenario on $label failed: $(tail -n 5 "$log")"
    local line
    line=$(tail -n 1 "$out")
    local nodes_json=""
    for node in "$@"; do
        nodes_json+="${nodes_json:+,}{\"group\":\"$node\",\"cpu_ns\":$(($(usage_ns "$node") - ${before_ns[$node]})),\"throttled_periods\":$(($(throttled "$node") - ${before_thr[$node]}))}"
    done
    python3 - "$line" "[$nodes_json]" <<'PY'
import json, sys
run, nodes = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ops = run["ops"] or 1
for n in nodes:
    n["cpu_ms_per_op"] = round(n["cpu_ns"] / 1e6 / ops, 3)
print(json.dumps({
    "per_second": run["per_second"], "ops": run["ops"], "errors": run["errors"],
    "check": run.get("check"), "server_cpu_pct": run.get("server_cpu_pct"),
    "client_cpu_pct": run.get("client_cpu_pct"),
    "db_cpu_ms_per_op": round(sum(n["cpu_ns"] for n in nodes) / 1e6 / ops, 3),
    "nodes": nodes}))
PY
}

# One size: a cluster of $1 workers; "baseline" uses one node of a one-worker cluster, plain.
run_size() { # label workers plain
    local label=$1 workers=$2 plain=$3 printed coordinator ports node group
    CLUSTER_DIR=$WORK/citus-$label
    printed=$(CITUS_DIR=$CLUSTER_DIR bash "$REPO/scripts/citus.sh" up --workers "$workers" 2>"$WORK/$label-up.log") ||
        die "citus.sh up --workers $workers failed: $(tail -n 5 "$WORK/$label-up.log")"
    coordinator=$(awk -F= '$1 == "COORDINATOR_PORT" { print $2 }' "$CLUSTER_DIR/ports")
    if [ -n "$SHARD_COUNT" ]; then
        psql -h 127.0.0.1 -p "$coordinator" -U postgres -d postgres -qX \
            -c "alter system set citus.shard_count = $SHARD_COUNT" -c "select pg_reload_conf()" >/dev/null
    fi
    local groups=() worker_list=""
    for node in coordinator $(seq -f 'worker%g' 1 "$workers"); do
        group="wl-scale-$$-$label-$node"
        cap_node "$group" "$CLUSTER_DIR/$node"
        [ "$node" = coordinator ] || worker_list+="${worker_list:+,}127.0.0.1:$(awk -F= -v n="${node^^}_PORT" '$1 == n { print $2 }' "$CLUSTER_DIR/ports")"
        groups+=("$group")
    done
    if [ "$plain" = yes ]; then worker_list=""; groups=("${groups[0]}"); fi
    local url="postgres://postgres@127.0.0.1:$coordinator/wallet_ledger_bench?sslmode=disable"
    say "$label: transfers"
    local transfers messages
    transfers=$(measure "$label" api-transfers "$url" "$worker_list" "${groups[@]}")
    say "$label: consumer"
    messages=$(measure "$label" consumer "$url" "$worker_list" "${groups[@]}")
    python3 - "$label" "$workers" "$plain" "$NODE_CPU" "$transfers" "$messages" "$SHARD_COUNT" <<'PY'
import json, sys
label, workers, plain, quota = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "yes", float(sys.argv[4])
shards = None if plain else int(sys.argv[7] or 32)
t, m = json.loads(sys.argv[5]), json.loads(sys.argv[6])
print(json.dumps({
    "size": label, "engine": "postgres" if plain else "citus", "workers": 0 if plain else workers,
    "shard_count": shards,
    "node_cpu_quota": quota, "transfers_per_s": t["per_second"], "messages_per_s": m["per_second"],
    "db_cpu_ms_per_transfer": t["db_cpu_ms_per_op"], "db_cpu_ms_per_message": m["db_cpu_ms_per_op"],
    "transfers": t, "messages": m,
    "uncapped": "the service (serve, consume) and the load client share the rest of the CPU"}))
PY
    CITUS_DIR=$CLUSTER_DIR bash "$REPO/scripts/citus.sh" down >/dev/null 2>&1
    CLUSTER_DIR=
}

run_size postgres 1 yes
for n in ${WORKER_COUNTS//,/ }; do
    run_size "citus-$n" "$n" no
done
