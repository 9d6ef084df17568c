"""Idempotency-Key on every create: the first answer is stored with what it created.

``idempotent_create`` runs the create and stores its answer (status and body) in the same
transaction, so either both are committed or neither: a retry after a lost response finds
the answer and gets it again (``Idempotent-Replayed: true``) with nothing created twice; a
retry racing the first request loses on the unique (key, Idempotency-Key) and is answered
with the winner's row. The same key with another body or on another operation is a 409.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from delivery.api.errors import ApiProblem
from delivery.models import ApiCreated, ApiKey


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    replayed: bool = False


def idempotent_create(
    *,
    api_key: ApiKey,
    operation: str,
    idempotency_key: str | None,
    request_sha256: str,
    create: Callable[[], tuple[int, dict[str, Any]]],
) -> Answer:
    """Run ``create`` (returning status and body) once per Idempotency-Key."""
    if idempotency_key is None:
        with transaction.atomic():
            status, body = create()
        return Answer(status, body)
    earlier = _earlier(api_key, operation, idempotency_key, request_sha256)
    if earlier is not None:
        return earlier
    try:
        with transaction.atomic():
            status, body = create()
            if status < 300:
                ApiCreated.objects.create(
                    api_key=api_key,
                    idempotency_key=idempotency_key,
                    operation=operation,
                    request_sha256=request_sha256,
                    status_code=status,
                    body=body,
                )
    except IntegrityError:
        # A concurrent retry committed first: its answer is the answer.
        earlier = _earlier(api_key, operation, idempotency_key, request_sha256)
        if earlier is None:
            raise
        return earlier
    return Answer(status, body)


def _earlier(api_key: ApiKey, operation: str, key: str, sha256: str) -> Answer | None:
    stored = ApiCreated.objects.filter(api_key=api_key, idempotency_key=key).first()
    if stored is None:
        return None
    if stored.operation != operation or stored.request_sha256 != sha256:
        raise ApiProblem(
            409,
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request.",
            fields={"Idempotency-Key": "Already used for another request."},
        )
    return Answer(stored.status_code, stored.body, replayed=True)
