"""The transactional API: ``/api/v1/messages`` (send, status) and its OpenAPI description."""
