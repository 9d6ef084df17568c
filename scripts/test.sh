#!/usr/bin/env bash
# Runs the whole pytest suite; fails when no test ran (pytest exits 5 then, which is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}"

# Browser tests drive the system Chromium (a browser download is not possible here).
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing chromium for the browser tests" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "browser tests need /usr/bin/chromium: run 'sudo apt-get install -y chromium'" >&2
        exit 1
    fi
fi

.venv/bin/python -m pytest "$@"
