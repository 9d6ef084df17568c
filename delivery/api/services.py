"""Transactional sends through the API: checks that need the database, then one INSERT.

``transactional_message_create`` takes a parsed request and either finds the message an
earlier request with the same Idempotency-Key created, or checks the key's scope, the
template (or the service window for a text) and creates the message, queued on the
``transactional`` queue once the row is committed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import redis
from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.models import PhoneNumber, Template, TemplateStatus
from delivery.api.errors import ApiProblem
from delivery.api.keys import api_key_allows
from delivery.api.template_params import params_for_template
from delivery.api.validation import MessageRequest
from delivery.engine import dispatch
from delivery.messages import transactional_message_insert
from delivery.models import ApiKey, Message, MessageKind
from delivery.service_windows import service_window_open

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MessageCreated:
    message: Message
    replayed: bool  # an earlier request with the same Idempotency-Key created it


def transactional_message_create(
    *,
    api_key: ApiKey,
    request: MessageRequest,
    idempotency_key: str | None,
    request_sha256: str,
) -> MessageCreated:
    """Create (or, for a retried request, find) one transactional message."""
    if idempotency_key is not None:
        earlier = _idempotent_replay(api_key, idempotency_key, request_sha256)
        if earlier is not None:
            return earlier
    number = _number_in_scope(api_key, request.phone_number_id)
    template, params = (None, {}) if request.template is None else _template_for(number, request)
    if request.text is not None:
        _service_window_check(number, request.to)
    message = Message(
        kind=MessageKind.TRANSACTIONAL,
        campaign=None,
        phone_number=number,
        template=template,
        to=request.to,
        params=params,
        text=request.text or "",
        next_attempt_at=timezone.now(),
        api_key=api_key,
        idempotency_key=idempotency_key,
        request_sha256=request_sha256,
    )
    try:
        # The savepoint lets a lost idempotency race be answered on the same connection.
        with transaction.atomic():
            transactional_message_insert(message)
            transaction.on_commit(lambda: _enqueue(message.pk))
    except IntegrityError:
        if idempotency_key is None:
            raise
        # Two concurrent retries of one request: the other INSERT won, answer with its row.
        earlier = _idempotent_replay(api_key, idempotency_key, request_sha256)
        if earlier is None:
            raise
        return earlier
    return MessageCreated(message=message, replayed=False)


def _idempotent_replay(api_key: ApiKey, key: str, sha256: str) -> MessageCreated | None:
    message = (
        Message.objects.select_related("phone_number")
        .filter(api_key=api_key, idempotency_key=key)
        .first()
    )
    if message is None:
        return None
    if message.request_sha256 != sha256:
        raise ApiProblem(
            409,
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request body.",
            fields={"Idempotency-Key": "Already used for another request."},
        )
    if not api_key_allows(api_key=api_key, phone_number_pk=message.phone_number_id):
        raise _out_of_scope()
    return MessageCreated(message=message, replayed=True)


def _number_in_scope(api_key: ApiKey, phone_number_id: str) -> PhoneNumber:
    number = PhoneNumber.objects.filter(phone_number_id=phone_number_id).first()
    if number is not None and api_key_allows(api_key=api_key, phone_number_pk=number.pk):
        return number
    if number is None and api_key.all_numbers:
        raise ApiProblem(
            422,
            "unknown_phone_number",
            "No phone number with this id is configured.",
            fields={"phone_number_id": "Unknown phone number id."},
        )
    # A scoped key learns nothing about numbers outside its scope, not even that they exist.
    raise _out_of_scope()


def _out_of_scope() -> ApiProblem:
    return ApiProblem(
        403,
        "phone_number_not_allowed",
        "This API key may not send from this phone number.",
        fields={"phone_number_id": "Not in this API key's scope."},
    )


def _template_for(number: PhoneNumber, request: MessageRequest) -> tuple[Template, dict[str, Any]]:
    wanted = request.template
    assert wanted is not None
    template = Template.objects.filter(
        account_id=number.account_id, name=wanted.name, language=wanted.language
    ).first()
    if template is None:
        raise ApiProblem(
            422,
            "unknown_template",
            f"No template {wanted.name!r} in {wanted.language!r} for this number's account.",
            fields={"template.name": "Unknown template (name and language)."},
        )
    if template.status != TemplateStatus.APPROVED:
        raise ApiProblem(
            422,
            "template_not_approved",
            f"Template {wanted.name!r} is {template.status}, not APPROVED.",
            fields={"template.name": f"Template status is {template.status}."},
        )
    return template, params_for_template(template, wanted.params)


def _service_window_check(number: PhoneNumber, to: str) -> None:
    if not service_window_open(phone_number_id=number.pk, user=to):
        raise ApiProblem(
            422,
            "outside_service_window",
            "Free-form text may only be sent within 24 hours of the recipient's last "
            "message to this number; send an approved template instead.",
            fields={"text": "The recipient has not written to this number in the last 24 h."},
        )


def _enqueue(message_id: int) -> None:
    try:
        dispatch.transactional_enqueue(message_id=message_id, attempt=0)
    except redis.RedisError as exc:
        # The row is committed and due: the maintenance tick's sweep queues it.
        logger.warning("transactional message %s not queued (%s)", message_id, exc)
