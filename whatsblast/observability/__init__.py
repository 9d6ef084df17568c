"""Operating whatsblast: engine metrics kept in Redis, their Prometheus exporter, readiness.

- ``metrics``: what the engine and the webhook endpoint call to count (one pipeline per batch);
- ``collector``: reads those counts and cheap PostgreSQL aggregates at scrape time;
- ``views``: ``/metrics`` (Django's own metrics plus the engine's);
- ``readiness``: the checks behind ``/readyz``.
"""
