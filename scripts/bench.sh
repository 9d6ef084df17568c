#!/usr/bin/env bash
# Runs the benchmark scenarios one after another; each prints one JSON object.
# Run on a quiet machine: the figures are throughput and latency under load.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
run() { echo "== $*" >&2; "$py" "$@"; }
run bench/simulator_ceiling.py --seconds 10
run bench/client_throughput.py
for rate in 80 250 1000; do run bench/engine_rate.py --rate "$rate" --seconds 20; done
run bench/engine_rate.py --rate 80 --numbers 10 --seconds 20
run bench/webhook_apply.py --messages 20000
run bench/webhook_ingest.py --seconds 10
run bench/transactional_latency.py
run bench/import_contacts.py --rows 1000000
run bench/million.py --recipients 1000000 --rate 1000
