#!/usr/bin/env bash
# The typed clients under clients/, generated from openapi/openapi.json (clients/README.md).
#
#   bash scripts/clients.sh generate   rewrite clients/python and clients/typescript/src/schema.d.ts
#   bash scripts/clients.sh check      regenerate into a scratch copy and fail on any difference
#                                      from what is committed, then run each client's smoke test
#                                      against a fresh server (scripts/test-server.sh)
#
# The generators are pinned below and installed on first use: the Python ones in a virtualenv
# under target/clients-venv, the npm ones by `npm ci` from clients/typescript's lockfile.
# Needs python3 and node with npm (installed from Debian when missing and run as root), and
# for `check` PostgreSQL (scripts/services.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

OPENAPI_PYTHON_CLIENT_VERSION=0.29.1
RUFF_VERSION=0.17.6
# What the generated client needs at run time (its setup.py's ranges), for the smoke test.
HTTPX_VERSION=0.28.1
ATTRS_VERSION=25.4.0
venv=target/clients-venv

install_tools() {
    # A fresh machine of this kind has Node.js; one without it gets Debian's, as services.sh
    # does for the databases (root only; otherwise it says what to install).
    if ! command -v npm >/dev/null; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "clients: npm is missing: apt-get install nodejs npm" >&2
            exit 1
        fi
        echo "installing nodejs and npm from Debian's packages" >&2
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >&2
    fi
    if [ "$("$venv/bin/openapi-python-client" --version 2>/dev/null | awk '{print $NF}')" != "$OPENAPI_PYTHON_CLIENT_VERSION" ] ||
        [ "$("$venv/bin/ruff" --version 2>/dev/null | awk '{print $NF}')" != "$RUFF_VERSION" ]; then
        echo "installing openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION and ruff==$RUFF_VERSION" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check \
            "openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION" "ruff==$RUFF_VERSION" \
            "httpx==$HTTPX_VERSION" "attrs==$ATTRS_VERSION" >&2
    fi
    (cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error >&2)
}

# Generates both clients from the committed document into `$1` (a copy of clients/).
generate_into() {
    local out
    out=$(cd "$1" && pwd)
    rm -rf "$out/python"
    # ruff, which formats the generated code, is found on PATH.
    RUFF_NO_CACHE=true PATH="$PWD/$venv/bin:$PATH" openapi-python-client generate --path openapi/openapi.json \
        --output-path "$out/python" --meta setup --config clients/python-config.yaml >/dev/null
    (cd clients/typescript && npx --no-install openapi-typescript ../../openapi/openapi.json \
        --output "$out/typescript/src/schema.d.ts" >/dev/null 2>&1)
}

check_generated() {
    local scratch
    scratch=$(mktemp -d)
    mkdir -p "$scratch/typescript/src"
    generate_into "$scratch"
    local stale=0
    diff -r -x __pycache__ "$scratch/python" clients/python >&2 || stale=1
    diff "$scratch/typescript/src/schema.d.ts" clients/typescript/src/schema.d.ts >&2 || stale=1
    rm -rf "$scratch"
    if [ "$stale" -ne 0 ]; then
        echo "clients/ is not what openapi/openapi.json generates: run bash scripts/clients.sh generate" >&2
        exit 1
    fi
    echo "clients: generated code matches openapi/openapi.json" >&2
}

smoke() {
    (cd clients/typescript && npx --no-install tsc -p .)
    cargo build --quiet
    export RUST_LOG=${RUST_LOG:-warn}
    source scripts/test-server.sh
    start_test_server clients
    # The generated package is used where it is, not installed (an install would build into
    # clients/python and leave files the next check would call stale).
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=clients/python "$venv/bin/python" clients/python_smoke.py "$base" "$token"
    node clients/typescript/dist/smoke.js "$base" "$token"
}

case "${1:-}" in
generate)
    install_tools
    generate_into clients
    ;;
check)
    install_tools
    check_generated
    smoke
    ;;
*)
    echo "usage: bash scripts/clients.sh generate|check" >&2
    exit 2
    ;;
esac
