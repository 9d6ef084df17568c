"""The views other than the admin: Meta's webhook, the transactional API, health, metrics."""
