#!/usr/bin/env bash
# Schema-driven fuzzing of the API: schemathesis generates requests, valid and invalid, from the
# served OpenAPI document and checks every answer against it: no 5xx, every status code, content
# type, header and body as documented for its operation, schema-violating requests refused.
# scripts/schemathesis.toml says which checks run; scripts/schemathesis_hooks.py gives every
# create a fresh id, as a client does. Needs PostgreSQL (scripts/services.sh).
# Starts a fresh server (`--no-outbox`) on a free port over a fresh database with an admin key,
# seeds the fixtures the toml's dictionaries name, and afterwards stops the server (SIGTERM) and
# drops the database. Exits non-zero when schemathesis finds a failure or an error.
#
# Bounded: SCHEMATHESIS_MAX_EXAMPLES cases per operation and phase (default 100, about a
# minute); a run still going after SCHEMATHESIS_TIMEOUT seconds (default 900) is stopped and
# fails. SCHEMATHESIS_SEED replays a run (its seed is printed at the end). Extra arguments go to
# `schemathesis run`, e.g. `bash scripts/schemathesis.sh --include-path-regex '^/v1/accounts'`.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
MAX_EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-100}
TIMEOUT=${SCHEMATHESIS_TIMEOUT:-900}

if [ "$(python3 -m schemathesis.cli --version 2>/dev/null | awk '{print $NF}')" != "$SCHEMATHESIS_VERSION" ]; then
    echo "installing schemathesis==$SCHEMATHESIS_VERSION" >&2
    python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2 ||
        { echo "could not install schemathesis==$SCHEMATHESIS_VERSION from PyPI" >&2; exit 1; }
fi

cargo build --quiet
export RUST_LOG=${RUST_LOG:-warn}

# The seeded webhooks point at 127.0.0.1:9, listed as an in-house receiver would be (loopback
# is refused by default); the document's example webhook names hooks.example.com (`--no-outbox`:
# the server sends nothing; the seeding's short dispatcher run below tries 127.0.0.1:9, where
# nothing listens).
source scripts/test-server.sh
# The consumer's admin endpoints read a stream of this run's own on the local Redis, with dead
# letters of known ids in partition 0: two the toml's dictionaries name (one replayed, one
# dropped, so that neither action finds the other's 409) and the three the document's examples
# name (get, replay, drop); the keys expire within a day should the run stop before its cleanup.
stream=schemathesis.$$
redis=redis://127.0.0.1:6379
start_test_server schemathesis --webhook-allowed-hosts 127.0.0.1:9,hooks.example.com \
    --redis-url "$redis" --stream "$stream"
n=0
for id in 1-1 1-2 1796016587604-0 1796016587604-1 1796016587604-2; do
    n=$((n + 1))
    redis-cli -u "$redis" XADD "$stream.dlq" "$id" event_id "5c1a0000-0000-4000-8000-00000000010$n" \
        wallet st-ghost amount 100 dlq_reason unknown_account dlq_detail "no wallet st-ghost" \
        dlq_differing_fields "" dlq_original_id "$id" dlq_group wallet-ledger dlq_consumer st \
        dlq_failures 1 dlq_at 2026-12-06T00:00:00.000Z >/dev/null ||
        { echo "seeding the dead letter $id failed" >&2; exit 1; }
done
redis-cli -u "$redis" EXPIRE "$stream.dlq" 86400 >/dev/null

# Fixtures that scripts/schemathesis.toml names in its dictionaries, so that many generated
# requests reach real resources (and their 2xx bodies are checked) instead of 404 and 422.
post() {
    curl -fsS -o /dev/null -X POST "$base$1" -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' -d "$2" ||
        { echo "seeding POST $1 failed: $2" >&2; exit 1; }
}
# The webhook first, so that the transactions below have deliveries to it.
post /v1/webhooks '{"id": "5c1a0000-0000-4000-8000-000000000005", "url": "http://127.0.0.1:9/hook"}'
post /v1/accounts '{"id": "st-w1", "currency": "USD", "type": "wallet"}'
post /v1/accounts '{"id": "st-w2", "currency": "USD", "type": "wallet", "overdraft_limit": 5000}'
post /v1/accounts '{"id": "st-sys", "currency": "USD", "type": "system"}'
post /v1/accounts '{"id": "st-eur", "currency": "EUR", "type": "wallet"}'
for n in 1 2 3; do
    post /v1/accounts '{"id": "st-s'"$n"'", "currency": "USD", "type": "wallet"}'
done
post /v1/payments '{"id": "5c1a0000-0000-4000-8000-000000000001", "account": "st-w1", "amount": 1000000, "currency": "USD", "provider": "st-bank", "external_ref": "st-pay-1"}'
post /v1/transfers '{"id": "5c1a0000-0000-4000-8000-000000000002", "from": "st-w1", "to": "st-w2", "amount": 2500}'
post /v1/transfers '{"id": "5c1a0000-0000-4000-8000-000000000003", "from": "st-w1", "to": "st-w2", "amount": 700, "status": "pending"}'
post /v1/transactions '{"id": "5c1a0000-0000-4000-8000-000000000004", "entries": [{"account": "st-sys", "amount": -300}, {"account": "st-w2", "amount": 300}], "status": "pending"}'
# The holds the toml's `holds` dictionary names beyond these two: void uses one up each, and
# every phase needs some left (a capture the hook sends to a hold made for it).
for n in $(seq -w 1 24); do
    post /v1/transfers '{"id": "5c1a0000-0000-4000-8000-0000000002'"$n"'", "from": "st-w1", "to": "st-w2", "amount": 5000, "status": "pending"}'
done

# The accounts and transactions the document's examples name (README's walk-through), so that
# the examples are accepted: alice's payment (reversed by the reversal example), the holds the
# capture and void examples name, and money enough for every example's transfer.
post /v1/accounts '{"id": "alice", "currency": "SAR", "type": "wallet"}'
post /v1/accounts '{"id": "bob", "currency": "SAR", "type": "wallet"}'
post /v1/accounts '{"id": "alice-usd", "currency": "USD", "type": "wallet"}'
post /v1/payments '{"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f01", "account": "alice", "amount": 10000, "currency": "SAR", "provider": "moyasar", "external_ref": "pay_123"}'
post /v1/payments '{"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f0d", "account": "alice", "amount": 1000000, "currency": "SAR", "provider": "moyasar"}'
post /v1/transfers '{"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f04", "from": "alice", "to": "bob", "amount": 2000, "status": "pending"}'
post /v1/transfers '{"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f0c", "from": "alice", "to": "bob", "amount": 500, "status": "pending"}'

# The account sets the toml's dictionaries name, each with members in its own currency: the
# document's example set (created as its example creates it) with its example member, carol
# (made as the account example makes her), and another riyal wallet; a dollar set of two dollar
# wallets, itself a member of a second dollar set. Their wallets move no money in the run: a
# limit on a set holds every wallet in it, and the run puts limits on sets it finds in earlier
# answers (`team-eu` among them), which would refuse the transfers of alice or st-w1 for the
# rest of the run. A set of its own, without members, has a limit of a known id (for
# `DELETE .../limits/{limit_id}`; a repeat answers the same); the top dollar set has a monitor
# of a known id (for `GET`/`DELETE .../monitors/{monitor_id}`).
post /v1/accounts '{"id": "carol", "currency": "SAR", "type": "wallet", "metadata": {"customer": "c-7"}}'
post /v1/accounts '{"id": "st-m-sar", "currency": "SAR", "type": "wallet"}'
post /v1/accounts '{"id": "st-m-usd1", "currency": "USD", "type": "wallet"}'
post /v1/accounts '{"id": "st-m-usd2", "currency": "USD", "type": "wallet"}'
post /v1/payments '{"id": "5c1a0000-0000-4000-8000-000000000300", "account": "st-m-usd1", "amount": 4200, "currency": "USD", "provider": "st-bank"}'
post /v1/account-sets '{"id": "team-eu", "currency": "SAR", "metadata": {"region": "eu"}}'
post /v1/account-sets '{"id": "st-set-sar", "currency": "SAR"}'
post /v1/account-sets '{"id": "st-set-usd", "currency": "USD"}'
post /v1/account-sets '{"id": "st-set-top", "currency": "USD", "metadata": {"level": "top"}}'
post /v1/account-sets '{"id": "st-set-lim", "currency": "USD"}'
post /v1/account-sets/team-eu/members '{"type": "account", "id": "carol"}'
post /v1/account-sets/st-set-sar/members '{"type": "account", "id": "st-m-sar"}'
post /v1/account-sets/st-set-usd/members '{"type": "account", "id": "st-m-usd1"}'
post /v1/account-sets/st-set-usd/members '{"type": "account", "id": "st-m-usd2"}'
post /v1/account-sets/st-set-top/members '{"type": "set", "id": "st-set-usd"}'
post /v1/account-sets/st-set-lim/limits '{"id": "5c1a0000-0000-4000-8000-000000000301", "direction": "debit", "window_seconds": 3600, "amount": 100000}'
post /v1/account-sets/st-set-top/monitors '{"id": "5c1a0000-0000-4000-8000-000000000302", "field": "available", "operator": "lt", "value": 1000}'

# Webhook deliveries, made by the real dispatcher: `outbox` runs until the seeded transactions'
# events are fanned out to the webhook (its first attempts to 127.0.0.1:9 fail and are retried
# later: the deliveries stay pending), then stops; the server itself runs with --no-outbox.
"$bin" outbox --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$database" --no-migrate \
    --webhook-allowed-hosts 127.0.0.1:9 --webhook-timeout-ms 1000 >/dev/null 2>&1 &
dispatcher=$!
deliveries=
for _ in $(seq 1 100); do
    deliveries=$(curl -fsS "$base/v1/deliveries?limit=3" -H "Authorization: Bearer $token" |
        python3 -c 'import json, sys; print(" ".join(json.dumps(d["id"]) for d in json.load(sys.stdin)["data"]))')
    [ -n "$deliveries" ] && break
    sleep 0.1
done
kill -TERM "$dispatcher" 2>/dev/null || true
wait "$dispatcher" 2>/dev/null || true
[ -n "$deliveries" ] || { echo "seeding webhook deliveries failed" >&2; exit 1; }

# A stored reconciliation run (the example payment, settled), whose id is known only now: the
# configuration is the committed one plus a dictionary of that id for the runs' paths.
work=$(mktemp -d)
printf 'payment_id,amount,currency,status,settled_at\n0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f01,100.00,SAR,settled,%s\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$work/settlement.csv"
reconciled=0
"$bin" reconcile --provider moyasar --settlement "$work/settlement.csv" --out "$work/reports" \
    --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$database" --settlement-lag-hours 0 \
    >/dev/null 2>&1 || reconciled=$?
# 1 is a run with exceptions (the second payment is not in the file): stored all the same.
[ "$reconciled" -le 1 ] || { echo "seeding a reconciliation run failed" >&2; exit 1; }
# A signed checkpoint of the seeded wallets' chain heads and transactions (checkpoint 1; a head
# of alice; the seeded transactions' proofs, unless a transaction elsewhere on the server held
# its horizon back).
eval "$("$bin" keys generate)"
CHECKPOINT_SIGNING_KEY=$CHECKPOINT_SIGNING_KEY "$bin" seal --no-migrate \
    --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$database" >/dev/null ||
    { echo "seeding a checkpoint failed" >&2; exit 1; }
run=$(curl -fsS "$base/v1/reconciliations?limit=1" -H "Authorization: Bearer $token" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')
config=$work/schemathesis.toml
cat scripts/schemathesis.toml - >"$config" <<EOF

[dictionaries.reconciliations]
values = ["$run"]

[[operations]]
include-path-regex = "^/v1/reconciliations/[{]id[}]"
parameters = { "path.id" = { dictionary = "reconciliations", probability = 0.8 } }

[dictionaries.deliveries]
values = [$(echo "$deliveries" | sed 's/ /, /g')]

[[operations]]
include-path-regex = "^/v1/deliveries/[{]id[}]"
parameters = { "path.id" = { dictionary = "deliveries", probability = 0.8 } }
EOF

seed=()
[ -n "${SCHEMATHESIS_SEED:-}" ] && seed=(--seed "$SCHEMATHESIS_SEED")

# One worker: with two threads, Hypothesis's lambda descriptions call ast.parse concurrently,
# which CPython 3.11 answers now and then with "AST constructor recursion depth mismatch".
status=0
# The hook makes a hold or a transaction for some captures and reversals: it is given the
# server and the key.
SCHEMATHESIS_LEDGER_URL=$base SCHEMATHESIS_LEDGER_TOKEN=$token \
    SCHEMATHESIS_HOOKS=scripts/schemathesis_hooks.py HYPOTHESIS_STORAGE_DIRECTORY=target/hypothesis timeout --signal=INT --kill-after=30 "$TIMEOUT" \
    python3 -m schemathesis.cli --config-file "$config" run "$base/openapi.json" \
    --header "Authorization: Bearer $token" \
    --max-examples "$MAX_EXAMPLES" \
    --workers 1 \
    --generation-database none \
    --no-color \
    "${seed[@]}" "$@" || status=$?

rm -rf "$work"
redis-cli -u "$redis" --scan --pattern "$stream*" |
    xargs -r redis-cli -u "$redis" DEL >/dev/null

# The server logs the cause of every 5xx once (JSON lines): show them.
if grep -qE '"level":"(ERROR|WARN)"' "$log"; then
    echo "server warnings and errors during the run:" >&2
    grep -E '"level":"(ERROR|WARN)"' "$log" | head -n 50 >&2
fi

if [ "$status" -ne 0 ]; then
    echo "schemathesis: failures found (exit $status)" >&2
else
    echo "schemathesis: no failures" >&2
fi
exit "$status"
