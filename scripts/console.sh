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
start_test_server console

BASE=$base TOKEN=$token OUT=$out CHROMIUM=$(command -v chromium) node tests/console/console.test.mjs
echo "console: screenshots in $out"
