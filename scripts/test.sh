#!/usr/bin/env bash
# Runs the whole pytest suite; fails when no test ran (pytest exits 5 then, which is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}"

# Browser tests drive the system Chromium (a browser download is not possible here); the
# webhook flood test runs nginx and wrk; the fault suite's network scenarios put worker
# hosts in network namespaces and partition them with iptables; the alert tests run
# promtool and their own prometheus. Debian's packages, installed when missing.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v wrk >/dev/null || missing+=(wrk)
command -v ip >/dev/null || missing+=(iproute2)
command -v iptables >/dev/null || missing+=(iptables)
command -v promtool >/dev/null || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing ${missing[*]} for the browser, flood, network and alert tests" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
        # The tests run their own nginx and prometheus; the packages' services (if the
        # install started them; containers usually refuse with policy-rc.d) are not wanted.
        for service in nginx prometheus; do
            if [ -d /run/systemd/system ]; then
                systemctl disable --now "$service" >/dev/null 2>&1 || true
            elif [ -x "/etc/init.d/$service" ]; then
                "/etc/init.d/$service" stop >/dev/null 2>&1 || true
                update-rc.d "$service" disable >/dev/null 2>&1 || true
            fi
        done
    else
        echo "the tests need ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'" >&2
        exit 1
    fi
fi

# Two worker processes (pytest-xdist), each test file on one of them with its tests in their
# order: most tests wait on I/O (a worker process, the simulator, a browser), so two take
# about half the time on two cores. Each worker has its own test database and Redis
# database (tests/conftest.py). WHATSBLAST_TEST_WORKERS=0 runs everything in this process.
.venv/bin/python -m pytest -n "${WHATSBLAST_TEST_WORKERS:-2}" --dist loadfile "$@"
