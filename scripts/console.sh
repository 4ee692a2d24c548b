#!/usr/bin/env bash
# The operator console (`serve` at /console) driven in a real browser: Debian's Chromium through
# playwright-core (tests/console/console.test.mjs), against a fresh server (scripts/test-server.sh).
#
#   bash scripts/console.sh check         run the browser test; screenshots go to a scratch folder
#   bash scripts/console.sh screenshots   the same, writing the screenshots to docs/console/
#
# Chromium (Debian's package) and Node.js with npm are installed when missing (as root);
# playwright-core by `npm ci` from tests/console's lockfile. Needs PostgreSQL (scripts/services.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-check}
case "$mode" in
check) out=$(mktemp -d) ;;
screenshots) out=$PWD/docs/console && mkdir -p "$out" ;;
*) echo "usage: scripts/console.sh check|screenshots" >&2 && exit 2 ;;
esac

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "console: missing ${missing[*]}: apt-get install ${missing[*]}" >&2
        exit 1
    fi
    echo "installing ${missing[*]} from Debian's packages" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
(cd tests/console && npm ci --no-audit --no-fund --loglevel=error >&2)

cargo build --quiet
# shellcheck source=scripts/test-server.sh
. scripts/test-server.sh
# The dead-letters page reads a stream of this run's own on the local Redis, with one dead
# letter that the test replays; the keys expire within a day should the run stop early.
stream=console.$$
redis=redis://127.0.0.1:6379
start_test_server console --redis-url "$redis" --stream "$stream" --webhook-allowed-hosts 127.0.0.1:9
redis-cli -u "$redis" XADD "$stream.dlq" 1-1 event_id 5c1a0000-0000-4000-8000-000000000201 \
    type payment.succeeded wallet ghost amount 100 currency SAR provider moyasar \
    dlq_reason unknown_account dlq_detail "no wallet ghost" dlq_differing_fields "" \
    dlq_original_id 1-1 dlq_group wallet-ledger dlq_consumer c1 dlq_failures 1 \
    dlq_at 2026-12-06T00:00:00.000Z >/dev/null
redis-cli -u "$redis" EXPIRE "$stream.dlq" 86400 >/dev/null
dispatcher=
cleanup() {
    if [ -n "$dispatcher" ]; then kill -TERM "$dispatcher" 2>/dev/null && wait "$dispatcher" 2>/dev/null || true; fi
    redis-cli -u "$redis" --scan --pattern "$stream*" | xargs -r redis-cli -u "$redis" DEL >/dev/null
    stop_test_server
}
trap cleanup EXIT
# `serve` runs no dispatcher here (--no-outbox): this one sends the test's webhook deliveries to
# 127.0.0.1:9, where nothing listens, once each, so the transaction page has dead ones to show.
"$bin" outbox --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$database" \
    --webhook-allowed-hosts 127.0.0.1:9 --webhook-max-attempts 1 --outbox-interval-ms 100 \
    >>"$log" 2>&1 &
dispatcher=$!

BASE=$base TOKEN=$token OUT=$out CHROMIUM=$(command -v chromium) node tests/console/console.test.mjs
echo "console: screenshots in $out"
