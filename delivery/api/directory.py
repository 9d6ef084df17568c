"""``/api/v1/`` lists, segments and templates: request bodies read, the one write each
makes, and each row as the API shows it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from campaigns.catalogue.params import template_param_slots
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import (
    BusinessAccount,
    ContactList,
    ListMembership,
    Segment,
    Template,
    TemplateStatus,
)
from delivery.api.contacts import (
    MAX_DESCRIPTION,
    MAX_LIST_NAME,
    FieldErrors,
    segment_unusable,
)
from delivery.api.errors import ApiProblem
from delivery.models import ApiKey
from delivery.segments.rules import RuleError
from delivery.segments.services import segment_match, segment_save

MAX_SEGMENT_NAME = 200  # Segment.name
MAX_TEMPLATE_NAME = 512  # Template.name
MAX_LANGUAGE = 16  # Template.language


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class NamedRequest:
    """A list or a segment to create."""

    name: str
    description: str
    rules: dict[str, Any] | None = None


def _named_parse(data: dict[str, Any], *, max_name: int, rules: bool) -> NamedRequest:
    errors = FieldErrors()
    allowed = {"name", "description", "rules"} if rules else {"name", "description"}
    errors.unknown(data, frozenset(allowed))
    name = None
    if "name" not in data:
        errors.add("name", "This field is required.")
    else:
        name = errors.text(data["name"], "name", max_length=max_name)
    description = ""
    if "description" in data:
        text = errors.text(
            data["description"], "description", max_length=MAX_DESCRIPTION, min_length=0
        )
        description = text or ""
    parsed_rules = None
    if rules:
        if not isinstance(data.get("rules"), dict):
            errors.add("rules", "Required: the segment's rules, a JSON object.")
        else:
            parsed_rules = data["rules"]
    errors.raise_any()
    assert name is not None
    return NamedRequest(name, description, parsed_rules)


# --- lists -----------------------------------------------------------------------------------


def list_request_parse(data: dict[str, Any]) -> NamedRequest:
    return _named_parse(data, max_name=MAX_LIST_NAME, rules=False)


def list_create(request: NamedRequest) -> dict[str, Any]:
    """Create the list; 409 when its name is taken."""
    try:
        with transaction.atomic():
            created = ContactList.objects.create(name=request.name, description=request.description)
    except IntegrityError:
        raise ApiProblem(
            409,
            "list_name_taken",
            "A list already has this name.",
            fields={"name": "Taken: list names are unique."},
        ) from None
    return list_render(created)


def lists_counted() -> QuerySet[ContactList]:
    """Every list with its member count (one index range count per list of the page)."""
    members = (
        ListMembership.objects.filter(contact_list=OuterRef("pk"))
        .order_by()
        .values("contact_list")
        .annotate(n=Count("*"))
        .values("n")
    )
    return ContactList.objects.annotate(
        members=Coalesce(Subquery(members, output_field=IntegerField()), 0)
    )


def list_render(contact_list: ContactList) -> dict[str, Any]:
    return {
        "id": contact_list.pk,
        "name": contact_list.name,
        "description": contact_list.description,
        "suppression": contact_list.suppression,
        "members": int(getattr(contact_list, "members", 0)),
        "created_at": _iso(contact_list.created_at),
    }


# --- segments --------------------------------------------------------------------------------

# Creates of the same name queue here, so the second finds the name taken rather than
# replacing the first (segment_save replaces a segment of the same name).
_NAME_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('delivery.api.segment:' || %s))"


def segment_request_parse(data: dict[str, Any]) -> NamedRequest:
    return _named_parse(data, max_name=MAX_SEGMENT_NAME, rules=True)


def rule_problem(exc: RuleError) -> ApiProblem:
    return ApiProblem(
        422,
        "invalid_segment_rules",
        f"The rules cannot be used: {exc}.",
        fields=exc.problems,
    )


def segment_create(request: NamedRequest) -> dict[str, Any]:
    """Create the segment; 409 when its name is taken, 422 naming the rule that cannot be
    used. Within the caller's transaction."""
    with connection.cursor() as cursor:
        cursor.execute(_NAME_LOCK_SQL, [request.name])
    if Segment.objects.filter(name=request.name).exists():
        raise ApiProblem(
            409,
            "segment_name_taken",
            "A segment already has this name.",
            fields={"name": "Taken: segment names are unique."},
        )
    try:
        segment = segment_save(
            name=request.name, rules=request.rules, description=request.description
        )
    except RuleError as exc:
        raise rule_problem(exc) from None
    return segment_render(segment)


def segments_listed() -> QuerySet[Segment]:
    return Segment.objects.all()


def segment_render(segment: Segment) -> dict[str, Any]:
    return {
        "id": segment.pk,
        "name": segment.name,
        "description": segment.description,
        "rules": segment.rules,
        "created_at": _iso(segment.created_at),
        "updated_at": _iso(segment.updated_at),
    }


def segment_count(segment_id: int) -> dict[str, Any]:
    """How many contacts the segment matches now; 404, or 422 when its rules no longer
    hold (a list they name was deleted since)."""
    segment = Segment.objects.filter(pk=segment_id).first()
    if segment is None:
        raise ApiProblem(404, "not_found", "No such segment.")
    try:
        match = segment_match(segment.rules)
    except RuleError as exc:
        raise segment_unusable(segment, exc) from None
    return {"id": segment.pk, "name": segment.name, "count": match.count}


# --- templates -------------------------------------------------------------------------------


def templates_of_key(api_key: ApiKey) -> QuerySet[Template]:
    """The templates of the business accounts the key's phone numbers belong to (all, for a
    key on every number): a key sees what it could send or build a campaign from."""
    templates = Template.objects.select_related("account")
    if not api_key.all_numbers:
        templates = templates.filter(
            account__in=BusinessAccount.objects.filter(
                phone_numbers__in=api_key.phone_numbers.all()
            )
        )
    return templates


def templates_filtered(query: Mapping[str, str], api_key: ApiKey) -> QuerySet[Template]:
    """The key's templates that ``?name=``, ``?language=`` and ``?status=`` select."""
    errors = FieldErrors()
    templates = templates_of_key(api_key)
    for name, max_length in (("name", MAX_TEMPLATE_NAME), ("language", MAX_LANGUAGE)):
        value = query.get(name)
        if value:
            text = errors.text(value, name, max_length=max_length, strip=False)
            templates = templates.filter(**{name: text})
    status = query.get("status")
    if status is not None:
        if status not in TemplateStatus.values:
            errors.add("status", f"One of {', '.join(TemplateStatus.values)}.")
        templates = templates.filter(status=status)
    errors.raise_any()
    return templates


def template_get(template_id: int, api_key: ApiKey) -> Template:
    """The template, or 404 when there is none or it is of an account outside the key's
    numbers (the two look the same)."""
    template = templates_of_key(api_key).filter(pk=template_id).first()
    if template is None:
        raise ApiProblem(404, "not_found", "No such template.")
    return template


def template_render(template: Template, *, components: bool = False) -> dict[str, Any]:
    """A template, what it shows and the parameters a send or a campaign gives it."""
    reasons = template_unusable_reasons(template)
    header = None
    if template.header_format:
        header = {"format": template.header_format, "text": template.header_text}
    buttons = [
        {
            "index": button.get("index"),
            "type": str(button.get("type") or ""),
            "text": str(button.get("text") or ""),
            "param": str(button.get("param") or "none"),
        }
        for button in template.buttons or ()
        if isinstance(button, dict)
    ]
    shown: dict[str, Any] = {
        "id": template.pk,
        "name": template.name,
        "language": template.language,
        "category": template.category,
        "status": template.status,
        "waba_id": template.account.waba_id,
        "parameter_format": template.parameter_format or None,
        "quality_score": template.quality_score or None,
        "header": header,
        "body": template.body_text,
        "buttons": buttons,
        "has_carousel": bool(template.cards),
        "param_slots": [
            {
                "path": slot["path"],
                "label": slot["label"],
                "required": slot["required"],
                "kind": slot["kind"],
                "example": slot["example"] if isinstance(slot["example"], str) else "",
            }
            for slot in template_param_slots(template)
        ],
        "sendable": not reasons,
        "unusable_reasons": reasons,
        "removed_upstream": template.removed_upstream_at is not None,
        "updated_at": _iso(template.updated_at),
    }
    if components:
        shown["components"] = template.components if isinstance(template.components, list) else []
    return shown
