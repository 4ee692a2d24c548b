#!/bin/sh
# Peak RSS of `wallet-ledger reconcile` as its settlement file grows (issue 24, finding 11).
#
#   scripts/reconcile_rss.sh [BINARY] [SIZES...]
#
# For each size N, writes a file of N lines that all become exceptions: half are for payments
# the ledger does not have (missing_in_ledger, each its own payout), half have an amount with
# too many decimals (unparsable_row). Runs reconcile on a scratch database with the default
# reports (html, json, csv) and prints N, the peak RSS (GNU time's %M, KiB), the wall time,
# the sizes of report.json, report.html and exceptions.csv, and the stored run's jsonb size.
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres) and GNU time at /usr/bin/time.
set -eu
BIN=${1:-target/release/wallet-ledger}
shift || true
SIZES=${*:-10000 100000 1000000}
PG=postgres://postgres@127.0.0.1:5432
DB=wallet_ledger_rss_$$
WORK=$(mktemp -d)
trap 'dropdb -h 127.0.0.1 -U postgres --if-exists "$DB" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
printf '%10s %12s %8s %12s %12s %14s %12s\n' lines peak_rss_kib wall_s report.json report.html exceptions.csv run_jsonb
for n in $SIZES; do
  awk -v n="$n" 'BEGIN {
    print "payment_id,external_ref,amount,currency,status,settled_at,fee,payout_ref";
    for (i = 0; i < n; i++) {
      if (i % 2 == 0) printf ",ref_%d,10.00,SAR,settled,2026-11-30T00:00:00Z,0.10,po_%d\n", i, i;
      else            printf ",ref_%d,12.345,SAR,settled,2026-11-30T00:00:00Z,0.10,po_%d\n", i, i;
    }
  }' > "$WORK/file.csv"
  rm -rf "$WORK/out"
  start=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$WORK/rss" "$BIN" reconcile --database-url "$PG/$DB" --provider psp \
    --settlement "$WORK/file.csv" --out "$WORK/out" --settlement-lag-hours 0 >/dev/null 2>"$WORK/err" \
    || [ $? -eq 1 ] || { cat "$WORK/err"; exit 2; }
  end=$(date +%s.%N)
  jsonb=$(psql -h 127.0.0.1 -U postgres -d "$DB" -Atc \
    "select pg_column_size(report) from reconciliation_runs order by seq desc limit 1")
  printf '%10s %12s %8.1f %12s %12s %14s %12s\n' "$n" "$(tail -1 "$WORK/rss")" \
    "$(echo "$end - $start" | bc)" "$(stat -c %s "$WORK/out/report.json")" \
    "$(stat -c %s "$WORK/out/report.html")" "$(stat -c %s "$WORK/out/exceptions.csv")" "$jsonb"
done
