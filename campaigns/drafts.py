"""Campaign drafts: a number, one of its account's templates, contact lists and a mapping.

Commands and the admin call these; each validates its input and raises
``django.core.exceptions.ValidationError`` with a message meant for the operator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.catalogue.numbers import phone_number_get
from campaigns.catalogue.params import ParamMappingError, mapping_validate
from campaigns.models import (
    AbMetric,
    Campaign,
    CampaignStatus,
    CampaignVariant,
    ContactList,
    PhoneNumber,
    Segment,
    Template,
    TemplateStatus,
)
from campaigns.windows.daily import SendWindow
from campaigns.windows.zones import zone_valid
from whatsblast.core.frequency import frequency_cap_parse
from whatsblast.core.link_destinations import link_destination_errors

# Templates a campaign can never send with; PENDING/PAUSED may still become usable.
_UNUSABLE_TEMPLATE_STATUSES = (
    TemplateStatus.REJECTED,
    TemplateStatus.DISABLED,
    TemplateStatus.DELETED,
)


def param_mapping_from_specs(
    specs: Iterable[str],
    *,
    header: str | None = None,
    buttons: Iterable[str] = (),
) -> dict[str, Any]:
    """``["1=name", "2=const:SALE20"]`` → ``{"body": {"1": {"field": "name"}, "2": {"value":
    "SALE20"}}}``: body param 1 from the contact's ``name``, param 2 the constant ``SALE20``.

    ``header`` is one source (``const:https://cdn/x.jpg``, ``const:4455`` for an uploaded
    media id, or a field); ``buttons`` are ``INDEX=SOURCE`` like the body specs.
    """
    mapping: dict[str, Any] = {"body": _sources_from_specs(specs, what="PARAM")}
    if header is not None:
        mapping["header"] = _source_from_spec(header.strip(), spec=header)
    button_sources = _sources_from_specs(buttons, what="INDEX")
    if button_sources:
        bad = [key for key in button_sources if not key.isdigit()]
        if bad:
            raise ValidationError(f"button index must be a number, got {', '.join(bad)}")
        mapping["buttons"] = button_sources
    return mapping


def _sources_from_specs(specs: Iterable[str], *, what: str) -> dict[str, dict[str, str]]:
    sources: dict[str, dict[str, str]] = {}
    for spec in specs:
        key, sep, source = spec.partition("=")
        key, source = key.strip(), source.strip()
        if not sep or not key or not source:
            raise ValidationError(
                f"bad param {spec!r}: expected {what}=FIELD or {what}=const:VALUE, e.g. 1=name"
            )
        if key in sources:
            raise ValidationError(f"param {key!r} is mapped twice")
        sources[key] = _source_from_spec(source, spec=spec)
    return sources


def _source_from_spec(source: str, *, spec: str) -> dict[str, str]:
    if source.startswith("const:"):
        return {"value": source.removeprefix("const:")}
    if not source:
        raise ValidationError(f"bad param {spec!r}: the source must not be blank")
    return {"field": source}


def param_mapping_validate(*, template: Template, param_mapping: dict[str, Any]) -> None:
    """Exactly the template's params mapped (``campaigns.catalogue.params.mapping_validate``), or a
    ``ValidationError`` worded for the operator."""
    try:
        mapping_validate(template, param_mapping)
    except ParamMappingError as exc:
        raise ValidationError(_mapping_error_text(template, exc)) from exc


def param_mapping_check_draft(*, template: Template, param_mapping: dict[str, Any]) -> str:
    """A draft may be saved before every parameter is mapped: returns what is still to map
    ("" when nothing), and raises ``ValidationError`` only for a mapping that can never
    fit (params the template does not have, malformed sources). The pre-flight and the
    launch still require the whole mapping."""
    try:
        mapping_validate(template, param_mapping)
    except ParamMappingError as exc:
        if exc.missing and not exc.unknown:
            return _mapping_error_text(template, exc)
        raise ValidationError(_mapping_error_text(template, exc)) from exc
    return ""


def _mapping_error_text(template: Template, exc: ParamMappingError) -> str:
    if exc.section == "body" and exc.unknown:
        return (
            f"template {template.name!r} has no body param(s) {', '.join(exc.unknown)}; "
            f"its params are: {', '.join(exc.expected) or 'none'}"
        )
    if exc.section == "body" and exc.missing:
        return (
            f"body param(s) {', '.join(exc.missing)} of template {template.name!r} are not mapped"
        )
    return str(exc)


def campaign_create(
    *,
    name: str,
    phone_number_id: str,
    template_name: str,
    list_names: Sequence[str],
    param_mapping: dict[str, Any] | None = None,
    language: str | None = None,
    window: SendWindow | None = None,
    time_zone: str = "",
    time_zone_attribute: str = "timezone",
    segment_names: Sequence[str] = (),
    exclude_list_names: Sequence[str] = (),
    exclude_segment_names: Sequence[str] = (),
    frequency_cap: str = "",
    frequency_cap_defer: bool = False,
    languages: bool = False,
    language_field: str = "language",
    language_fallback: str = "",
    link_destination: str = "",
    link_utm: bool = True,
    holdout_percent: float = 0.0,
    attribution_days: int = 7,
) -> Campaign:
    """Create a draft campaign from a number, one of its WABA's templates, and its audience:
    contact lists and segments, less the lists and segments it leaves out.

    ``frequency_cap`` overrides the site's marketing cap ("1/3d", "off"; '' keeps it).

    ``languages`` sends each recipient the approved version of the template's name in their
    language (read from ``language_field``, else their number's country), the rest
    ``language_fallback`` or nothing; the mapping must fit every version sent.

    ``window`` limits sends to a daily window in each recipient's local time (see
    campaigns.windows.zones for how the zone is found); ``time_zone`` is the zone for recipients
    whose number gives none, ``time_zone_attribute`` the contact attribute that overrides.

    ``link_destination`` is where a tracked link sends people (``{{field}}`` fills in the
    contact's), ``holdout_percent`` (0-50) the share deliberately not sent, to measure lift,
    ``attribution_days`` (1-90) how long after a message a conversion counts for it.
    """
    if not name.strip():
        raise ValidationError("the campaign name must not be blank")
    number = phone_number_get(phone_number_id)
    if languages and not language:
        # The versions share one mapping: the campaign holds one of them (the fallback
        # when it has one) and the launch picks each recipient's.
        language = _language_for_many(number, template_name, language_fallback.strip())
    template = _template_get(number=number, name=template_name, language=language)
    if not list_names and not segment_names:
        raise ValidationError("a campaign needs at least one contact list or segment")
    lists = _contact_lists_get(list_names)
    segments = _segments_get(segment_names)
    exclude_lists = _contact_lists_get(exclude_list_names)
    exclude_segments = _segments_get(exclude_segment_names)
    try:
        frequency_cap_parse(frequency_cap)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc
    param_mapping = param_mapping or {"body": {}}
    param_mapping_validate(template=template, param_mapping=param_mapping)
    engagement_check(
        link_destination=link_destination,
        holdout_percent=holdout_percent,
        attribution_days=attribution_days,
    )
    zone = zone_valid(time_zone) if time_zone.strip() else ""
    if zone is None:
        raise ValidationError(f"unknown time zone {time_zone!r}: use an IANA name such as UTC")
    with transaction.atomic():
        campaign = Campaign.objects.create(
            name=name.strip(),
            phone_number=number,
            template=template,
            param_mapping=param_mapping,
            status=CampaignStatus.DRAFT,
            window_start=window.start if window else None,
            window_end=window.end if window else None,
            time_zone=zone,
            time_zone_attribute=time_zone_attribute.strip(),
            frequency_cap=frequency_cap.strip().lower(),
            frequency_cap_defer=frequency_cap_defer,
            languages=languages,
            language_field=language_field.strip(),
            language_fallback=language_fallback.strip(),
            link_destination=link_destination.strip(),
            link_utm=link_utm,
            holdout_percent=holdout_percent,
            attribution_days=attribution_days,
        )
        campaign.lists.set(lists)
        campaign.segments.set(segments)
        campaign.exclude_lists.set(exclude_lists)
        campaign.exclude_segments.set(exclude_segments)
    return campaign


def engagement_check(
    *, link_destination: str, holdout_percent: float, attribution_days: int
) -> None:
    """The tracked link's destination, the holdout and the attribution window, or a
    ``ValidationError`` naming what is wrong."""
    errors = link_destination_errors(link_destination.strip()) if link_destination.strip() else []
    if not 0 <= holdout_percent <= MAX_HOLDOUT_PERCENT:
        errors.append(f"the holdout is 0 to {MAX_HOLDOUT_PERCENT:g}% of the audience")
    if not 1 <= attribution_days <= MAX_ATTRIBUTION_DAYS:
        errors.append(f"the attribution window is 1 to {MAX_ATTRIBUTION_DAYS} days")
    if errors:
        raise ValidationError("; ".join(errors))


MAX_HOLDOUT_PERCENT = 50.0
MAX_ATTRIBUTION_DAYS = 90
# An A/B test compares 2 to 5 variants (positions 0-4, shown as A-E).
MAX_VARIANTS = 5


def campaign_ab_test_set(
    *,
    campaign: Campaign,
    variants: Sequence[tuple[Template, dict[str, Any]]],
    share_percent: float,
    metric: str,
    decide_after_hours: float,
    min_sample: int,
    auto_winner: bool,
) -> Campaign:
    """Set a draft's A/B test: its variants (``campaign_variants_set``) and how the winner
    is decided. A share of 0 and no variants removes the test."""
    if not 0 <= share_percent <= 100:
        raise ValidationError("the A/B test's share is 0 to 100% of the audience")
    if metric not in AbMetric.values:
        raise ValidationError(f"the winning metric is one of {', '.join(AbMetric.values)}")
    if not 0 <= decide_after_hours <= 24 * 30:
        raise ValidationError("decide after 0 to 720 hours")
    if min_sample < 0:
        raise ValidationError("the sample per variant is a whole number, 0 or more")
    if share_percent and not 2 <= len(variants) <= MAX_VARIANTS:
        raise ValidationError(f"an A/B test has 2 to {MAX_VARIANTS} variants")
    with transaction.atomic():
        campaign_variants_set(campaign=campaign, variants=variants if share_percent else [])
        Campaign.objects.filter(pk=campaign.pk).update(
            ab_test_percent=share_percent,
            ab_metric=metric,
            ab_decide_after_hours=decide_after_hours,
            ab_decide_min_sample=min_sample,
            ab_auto_winner=auto_winner,
        )
    campaign.refresh_from_db()
    return campaign


def campaign_variants_set(
    *, campaign: Campaign, variants: Sequence[tuple[Template, dict[str, Any]]]
) -> list[CampaignVariant]:
    """Make the draft's A/B variants exactly ``variants`` (template, mapping), in order:
    the first is A. ``[]`` removes them all (no A/B test).

    Only a draft's variants change (its messages are rendered from them at launch). Each
    template must be of the campaign's account and each mapping fit it whole; how many
    variants a test needs and what else it asks of the campaign is checked by the launch
    (``delivery.campaigns.ab_launch.variants_errors``), as the form checks before saving.
    """
    if campaign.status != CampaignStatus.DRAFT:
        raise ValidationError("only a draft's A/B variants can change")
    if len(variants) > MAX_VARIANTS:
        raise ValidationError(f"an A/B test has at most {MAX_VARIANTS} variants")
    account_id = campaign.phone_number.account_id
    for position, (template, mapping) in enumerate(variants):
        label = "ABCDE"[position]
        if template.account_id != account_id:
            raise ValidationError(
                f"variant {label}: template {template} belongs to another business account"
            )
        try:
            param_mapping_validate(template=template, param_mapping=mapping)
        except ValidationError as exc:
            raise ValidationError(f"variant {label}: {exc.messages[0]}") from exc
    with transaction.atomic():
        campaign.variants.all().delete()
        return CampaignVariant.objects.bulk_create(
            CampaignVariant(
                campaign=campaign, position=position, template=template, param_mapping=mapping
            )
            for position, (template, mapping) in enumerate(variants)
        )


def _language_for_many(number: PhoneNumber, name: str, fallback: str) -> str | None:
    approved = sorted(
        Template.objects.filter(
            account=number.account, name=name, status=TemplateStatus.APPROVED
        ).values_list("language", flat=True)
    )
    if fallback in approved:
        return fallback
    return approved[0] if approved else None


def template_of_number(number: PhoneNumber, spec: str) -> Template:
    """The template ``NAME`` or ``NAME:LANGUAGE`` of the number's account, sendable."""
    name, _, language = spec.partition(":")
    return _template_get(number=number, name=name.strip(), language=language.strip() or None)


def _template_get(*, number: PhoneNumber, name: str, language: str | None) -> Template:
    templates = list(Template.objects.filter(account=number.account, name=name))
    if language:
        templates = [t for t in templates if t.language == language]
    if not templates:
        where = f" in language {language!r}" if language else ""
        raise ValidationError(
            f"no template {name!r}{where} for the WABA of number {number.phone_number_id}"
        )
    if len(templates) > 1:
        languages = ", ".join(sorted(t.language for t in templates))
        raise ValidationError(f"template {name!r} exists in {languages}: choose a language")
    template = templates[0]
    if template.status in _UNUSABLE_TEMPLATE_STATUSES:
        raise ValidationError(f"template {name!r} is {template.status} and cannot be sent")
    return template


def _contact_lists_get(list_names: Sequence[str]) -> list[ContactList]:
    lists = list(ContactList.objects.filter(name__in=list_names))
    missing = sorted(set(list_names) - {cl.name for cl in lists})
    if missing:
        raise ValidationError(f"no contact list named {', '.join(repr(m) for m in missing)}")
    return lists


def _segments_get(names: Sequence[str]) -> list[Segment]:
    segments = list(Segment.objects.filter(name__in=names))
    missing = sorted(set(names) - {s.name for s in segments})
    if missing:
        raise ValidationError(f"no segment named {', '.join(repr(m) for m in missing)}")
    return segments


# What a copy of a campaign does not take: its identity, its run (status, times, the
# canary's, the A/B test's and the guard's verdicts) and its kind.
_NOT_COPIED = frozenset(
    {
        "id", "name", "kind", "status", "status_reason", "scheduled_at", "started_at",
        "completed_at", "first_completed_at", "canary_state", "guard_rate_cap",
        "guard_reason", "guard_since", "ab_state", "ab_winner", "ab_decided_at",
        "ab_decision", "created_at", "updated_at",
    }
)  # fmt: skip


def campaign_copy(*, model: Campaign, name: str, kind: str) -> Campaign:
    """A new draft with everything ``model`` is set to send (number, template, mapping,
    audience and exclusions, cap, window, languages, engagement, A/B variants, pool), as
    a recurring campaign's run is made from the campaign it repeats."""
    fields = {
        f.attname: getattr(model, f.attname)
        for f in Campaign._meta.concrete_fields
        if f.name not in _NOT_COPIED
    }
    with transaction.atomic():
        copy = Campaign.objects.create(
            **fields, name=name[:200], kind=kind, status=CampaignStatus.DRAFT
        )
        copy.lists.set(model.lists.all())
        copy.segments.set(model.segments.all())
        copy.exclude_lists.set(model.exclude_lists.all())
        copy.exclude_segments.set(model.exclude_segments.all())
        copy.pool_numbers.set(model.pool_numbers.all())
        copy.exclude_reached_campaigns.set(model.exclude_reached_campaigns.all())
        for variant in model.variants.order_by("position"):
            CampaignVariant.objects.create(
                campaign=copy,
                position=variant.position,
                template=variant.template,
                param_mapping=variant.param_mapping,
            )
    return copy
