#!/usr/bin/env bash
# Runs the whole pytest suite; fails when no test ran (pytest exits 5 then, which is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}"

# Browser tests drive the system Chromium (a browser download is not possible here); the
# webhook flood test runs nginx and wrk; the fault suite's network scenarios put worker
# hosts in network namespaces and partition them with iptables. Debian's packages,
# installed when missing.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v wrk >/dev/null || missing+=(wrk)
command -v ip >/dev/null || missing+=(iproute2)
command -v iptables >/dev/null || missing+=(iptables)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing ${missing[*]} for the browser, flood and network tests" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
        # The tests run their own nginx; the package's service (if it started) is not wanted.
        if [ -d /run/systemd/system ]; then
            systemctl disable --now nginx >/dev/null 2>&1 || true
        elif [ -x /etc/init.d/nginx ]; then
            /etc/init.d/nginx stop >/dev/null 2>&1 || true
            update-rc.d nginx disable >/dev/null 2>&1 || true
        fi
    else
        echo "the tests need ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'" >&2
        exit 1
    fi
fi

.venv/bin/python -m pytest "$@"
