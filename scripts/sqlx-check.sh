#!/usr/bin/env bash
# Checks that .sqlx/ holds exactly the query metadata the code needs: what
# `cargo sqlx prepare --check -- --all-targets` checks, without sqlx-cli. Installing sqlx-cli
# compiles it from source, 2 min of CI on a clean 2-core machine (docs/testing.md); the
# query macros themselves write the same files, so this asks them:
#
#  1. a scratch database with migrations/*.sql applied;
#  2. `cargo check --all-targets` of this crate only (its targets' roots touched, as sqlx-cli
#     does, so the macros run again; dependencies stay built), with SQLX_OFFLINE=false and
#     DATABASE_URL set, so every `query!` is described by that database and written to
#     SQLX_OFFLINE_DIR, a temporary directory;
#  3. that directory compared with .sqlx/: a file missing from .sqlx/, a file whose JSON
#     differs, or a file in .sqlx/ that no query wrote (unused: sqlx-cli only warns) fails.
#
# TEST_DATABASE_URL names the server (default: the local one). Exit 0 when .sqlx/ matches.
set -euo pipefail
cd "$(dirname "$0")/.."

server=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
database="wl_sqlx_check_$$"
database_url="${server%/*}/$database"
written=$(mktemp -d)

cleanup() {
    psql -X -q "$server" -c "drop database if exists $database with (force)" >/dev/null 2>&1 || true
    rm -rf "$written"
}
trap cleanup EXIT

# The migrations in order, each in one transaction, as sqlx's migrator applies them on one
# node (psql, not this crate's `migrate`: that build would read .sqlx/, which may be the
# very thing that is wrong).
psql -X -q -v ON_ERROR_STOP=1 "$server" -c "create database $database"
for migration in migrations/*.sql; do
    psql -X -q -v ON_ERROR_STOP=1 --single-transaction -d "$database_url" -f "$migration" >/dev/null
done

touch src/lib.rs src/main.rs tests/*/main.rs
SQLX_OFFLINE=false DATABASE_URL="$database_url" SQLX_OFFLINE_DIR="$written" \
    cargo check --quiet --all-targets

python3 - "$written" .sqlx <<'EOF'
import json, pathlib, sys

written, committed = (pathlib.Path(p) for p in sys.argv[1:])
def queries(d):
    return {p.name: json.loads(p.read_text()) for p in d.glob("query-*.json")}
now, kept = queries(written), queries(committed)
failures = [f"missing from .sqlx/: {n}" for n in sorted(now.keys() - kept.keys())]
failures += [f"differs from .sqlx/: {n}" for n in sorted(now.keys() & kept.keys()) if now[n] != kept[n]]
failures += [f"unused in .sqlx/: {n}" for n in sorted(kept.keys() - now.keys())]
if not now:
    failures.append("no query metadata was written: did the macros run?")
for f in failures:
    print(f, file=sys.stderr)
if failures:
    print("sqlx-check: .sqlx/ does not match the queries; run `cargo sqlx prepare -- --all-targets` "
          "(see .cargo/config.toml) and commit .sqlx/", file=sys.stderr)
    sys.exit(1)
print(f"sqlx-check: .sqlx/ matches the {len(now)} queries")
EOF
