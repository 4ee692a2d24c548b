# shellcheck shell=bash
# Sourced by scripts/ha.sh, scripts/citus.sh and scripts/redis-cluster.sh: the loopback ports
# and folder locks they share, so that any of them, in any folder, root or not, can run beside
# the others without two servers ever given one port. The sourcing script defines `die`.
#
# A reservation is a file $STATE_DIR/ports/<port> holding its owner, "FOLDER" or
# "FOLDER PART" (ha.sh reserves per half, pg or redis); it is stale once that folder (or part)
# is gone, so a crashed run never holds ports for good.

# Shared by every script and folder: port reservations and one lock per folder (outside the
# folder, as `down` removes it while others may wait for the lock).
STATE_DIR=/tmp/wallet-ledger-ha.d

# STATE_DIR and its sub-folder, writable by every user like /tmp (root and non-root runs meet).
state_dir() { # sub-folder
    [ -d "$STATE_DIR/$1" ] && return 0
    mkdir -p "$STATE_DIR/$1"
    chmod 1777 "$STATE_DIR" "$STATE_DIR/$1" 2>/dev/null || true
}

# Prints COUNT free loopback ports, reserved for OWNER. They are taken below the ephemeral
# range, so that no outgoing connection grabs one before our server binds it, and reserved
# under a lock, so that folders brought up at the same time never share one.
reserve_ports() { # count owner
    local count=$1 owner_of_new=$2
    state_dir ports
    [ -e "$STATE_DIR/ports.lock" ] || { : >"$STATE_DIR/ports.lock" && chmod 644 "$STATE_DIR/ports.lock"; }
    (
        flock -w 60 8 || die "no lock on $STATE_DIR/ports.lock"
        local low span port owner owner_part picked=0
        low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
        span=$((low > 21000 ? low - 20000 : 10000))
        for _ in $(seq 1 1000); do
            [ "$picked" -lt "$count" ] || break
            port=$((20000 + (RANDOM * 32768 + RANDOM) % span))
            if [ -e "$STATE_DIR/ports/$port" ]; then
                owner='' owner_part=''
                read -r owner owner_part <"$STATE_DIR/ports/$port" || true
                [ -n "$owner" ] && [ -d "$owner/$owner_part" ] && continue
            fi
            [ -z "$(ss -Htan exclude time-wait "( sport = :$port )")" ] || continue
            echo "$owner_of_new" >"$STATE_DIR/ports/$port"
            echo "$port"
            picked=$((picked + 1))
        done
        [ "$picked" -eq "$count" ] || die "found only $picked free ports"
    ) 8<"$STATE_DIR/ports.lock"
}

# Drops the reservations of OWNER: "FOLDER PART" drops that part's, "FOLDER" every part's.
release_ports() { # owner
    local f held
    for f in "$STATE_DIR"/ports/[0-9]*; do
        [ -e "$f" ] || continue
        held=$(cat "$f" 2>/dev/null) || continue
        case "$held" in
            "$1" | "$1 "*) rm -f "$f" ;;
        esac
    done
    return 0
}

# One `up`, `down`, kill or restart at a time per folder (tests may run in parallel).
lock_folder() { # folder
    local lock
    state_dir locks
    lock="$STATE_DIR/locks/$(printf %s "$1" | md5sum | cut -c1-16)"
    [ -e "$lock" ] || { : >"$lock" && chmod 644 "$lock"; }
    exec 9<"$lock"
    flock -w 900 9 || die "another run holds the lock of $1"
}
