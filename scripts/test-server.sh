# Sourced by scripts/schemathesis.sh and scripts/clients.sh: a fresh `serve` (`--no-outbox`,
# rate limit raised) on a free loopback port over a fresh database, with an admin key.
# `start_test_server NAME [extra serve flags]` sets `base`, `token` and `log`; an EXIT trap
# stops the server (SIGTERM) and drops the database. Needs PostgreSQL (scripts/services.sh) and
# `target/debug/wallet-ledger` (cargo build).

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
bin=target/debug/wallet-ledger
server=
database=
log=

stop_test_server() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server"
        wait "$server" 2>/dev/null || true
    fi
    if [ -n "$database" ]; then
        psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -q -v ON_ERROR_STOP=1 \
            -c "drop database if exists $database with (force)" >/dev/null || true
    fi
    if [ -n "$log" ]; then rm -f "$log"; fi
}

start_test_server() {
    local name=$1
    shift
    database=wallet_ledger_${name}_$$
    local database_url="postgres://$PGUSER@$PGHOST:$PGPORT/$database"
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    base="http://127.0.0.1:$port"
    log=$(mktemp -t "$name-server.XXXXXX")
    trap stop_test_server EXIT

    "$bin" migrate --database-url "$database_url" >/dev/null
    token=$("$bin" api-key create --owner "$name" --scope admin --database-url "$database_url")

    # The rate limit is raised so that a test's pace is never answered 429.
    LOG_FORMAT=json "$bin" serve --database-url "$database_url" --listen-addr "127.0.0.1:$port" \
        --no-outbox --rate-limit-per-second 100000 --rate-limit-burst 100000 "$@" >"$log" 2>&1 &
    server=$!

    for _ in $(seq 1 100); do
        curl -fsS "$base/readyz" >/dev/null 2>&1 && return 0
        kill -0 "$server" 2>/dev/null || { cat "$log" >&2; echo "the server exited before it was ready" >&2; exit 1; }
        sleep 0.1
    done
    curl -fsS "$base/readyz" >/dev/null || { cat "$log" >&2; echo "the server did not become ready" >&2; exit 1; }
}
