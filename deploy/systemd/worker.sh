#!/bin/sh
# Maps a whatsblast-worker@<instance> name to its queues (see whatsblast-worker@.service).
set -eu
PYTHON=/opt/whatsblast/.venv/bin/python
case "$1" in
    transactional) set -- transactional --with-scheduler ;;
    campaigns*) set -- transactional campaigns ;;
    maintenance) set -- maintenance --with-scheduler ;;
    *) echo "unknown worker instance: $1" >&2; exit 2 ;;
esac
exec "$PYTHON" manage.py rqworker "$@" --worker-ttl 60
