"""Writes for campaigns: numbers, templates, contact imports and campaigns.

Commands, the admin and jobs call these; each validates its input and raises
``django.core.exceptions.ValidationError`` with a message meant for the operator.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import phonenumbers
from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.contact_writer import ContactWriter
from campaigns.importers import (
    ContactReader,
    ReadAhead,
    Rejection,
    RejectsWriter,
    contact_batches,
    copy_payload,
)
from campaigns.models import (
    BusinessAccount,
    Campaign,
    CampaignStatus,
    ContactList,
    PhoneNumber,
    Template,
    TemplateCategory,
    TemplateStatus,
)
from campaigns.params import ParamMappingError, mapping_validate
from campaigns.windows import SendWindow
from campaigns.zones import zone_valid

logger = logging.getLogger(__name__)

DEFAULT_WABA_ID = "default"

# Rows per COPY + upsert. 20k rows is ~2 MB of COPY text and ~10 MB of Python objects;
# two batches are parsed ahead while one is written, so an import holds about three.
# Larger batches gain little (the per-batch statements are already a small share).
IMPORT_BATCH_SIZE = 20_000
IMPORT_READ_AHEAD = 2
# The JSON summary lists this many rejected rows; all of them go to --rejects.
MAX_LISTED_REJECTIONS = 1000

# {{1}} positional, {{first_name}} named (Meta: lower-case letters, digits, underscores).
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_NAMED_PARAM_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
# Templates a campaign can never send with; PENDING/PAUSED may still become usable.
_UNUSABLE_TEMPLATE_STATUSES = (
    TemplateStatus.REJECTED,
    TemplateStatus.DISABLED,
    TemplateStatus.DELETED,
)


# --- phone numbers -----------------------------------------------------------------------------


def phone_number_add(
    *,
    phone_number_id: str,
    display_phone_number: str,
    access_token: str,
    waba_id: str | None = None,
    rate_per_second: int = 80,
    transactional_reserve: float = 0.2,
    api_base_url: str = "",
) -> PhoneNumber:
    """Register a business phone number under its WABA (``"default"`` when none is given)."""
    if not access_token.strip():
        raise ValidationError("the access token must not be blank")
    with transaction.atomic():
        account, _ = BusinessAccount.objects.get_or_create(waba_id=waba_id or DEFAULT_WABA_ID)
        number = PhoneNumber(
            phone_number_id=phone_number_id.strip(),
            display_phone_number=display_phone_number.strip(),
            account=account,
            access_token=access_token.strip(),
            rate_per_second=rate_per_second,
            transactional_reserve=transactional_reserve,
            api_base_url=api_base_url.strip(),
        )
        number.full_clean()
        number.save()
    logger.info("phone number %s added to WABA %s", number.phone_number_id, account.waba_id)
    return number


# --- templates ---------------------------------------------------------------------------------


def template_params_parse(body_text: str) -> tuple[int, list[str]]:
    """(positional count, named params) of a template body.

    ``"Hi {{1}}, use {{2}}"`` → ``(2, [])``; ``"Hi {{first_name}}"`` → ``(0, ["first_name"])``.
    Meta requires positional params numbered 1..n without gaps and forbids mixing the kinds.
    """
    found = _PLACEHOLDER_RE.findall(body_text)
    positional = {int(p) for p in found if p.isdigit()}
    named = list(dict.fromkeys(p for p in found if not p.isdigit()))
    if positional and named:
        raise ValidationError("a template body mixes positional ({{1}}) and named params")
    bad = [p for p in named if not _NAMED_PARAM_RE.match(p)]
    if bad:
        raise ValidationError(
            f"invalid template param name(s) {', '.join(repr(b) for b in bad)}: "
            "use lower-case letters, digits and underscores"
        )
    if positional and positional != set(range(1, max(positional) + 1)):
        raise ValidationError(
            f"positional params must be numbered 1..n without gaps, got {sorted(positional)}"
        )
    return len(positional), named


def template_add(
    *,
    phone_number_id: str,
    name: str,
    language: str,
    body_text: str = "",
    category: str = TemplateCategory.MARKETING,
    status: str = TemplateStatus.APPROVED,
) -> Template:
    """Record a template of the number's WABA, with its body params parsed from the body."""
    number = _phone_number_get(phone_number_id)
    count, names = template_params_parse(body_text)
    template = Template(
        account=number.account,
        name=name.strip(),
        language=language.strip(),
        category=category.upper(),
        status=status.upper(),
        body_text=body_text,
        body_param_count=count,
        body_param_names=names,
    )
    template.full_clean()
    template.save()
    return template


def _phone_number_get(phone_number_id: str) -> PhoneNumber:
    try:
        return PhoneNumber.objects.select_related("account").get(phone_number_id=phone_number_id)
    except PhoneNumber.DoesNotExist:
        raise ValidationError(f"no phone number with id {phone_number_id!r}") from None


# --- contacts ----------------------------------------------------------------------------------


@dataclass
class ContactImportResult:
    list_id: int
    list_name: str
    rows_total: int = 0
    imported: int = 0
    merged: int = 0
    rejected: int = 0
    added_to_list: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    seconds: float = 0.0
    file: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return round(self.rows_total / self.seconds, 1) if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "list": self.list_name,
            "list_id": self.list_id,
            "rows_total": self.rows_total,
            "imported": self.imported,
            "merged": self.merged,
            "rejected": self.rejected,
            "added_to_list": self.added_to_list,
            "rejections": [r.as_dict() for r in self.rejections],
            "rejections_truncated": self.rejected > len(self.rejections),
            "seconds": round(self.seconds, 3),
            "rows_per_second": self.rows_per_second,
            "file": self.file,
        }


def contacts_import(
    *,
    path: str | Path,
    list_name: str,
    region: str | None = None,
    phone_column: str | None = None,
    name_column: str | None = None,
    encoding: str | None = None,
    rejects_path: str | Path | None = None,
    max_listed_rejections: int = MAX_LISTED_REJECTIONS,
    batch_size: int = IMPORT_BATCH_SIZE,
    attribute_columns: Sequence[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ContactImportResult:
    """Import a CSV/XLSX file of contacts into the list ``list_name`` (created if missing).

    Rows are normalised to E.164 (``region`` for numbers without a country code); a number
    seen before, in this file or in the database, is merged into its contact. Rejected rows
    are counted and listed (the first ``max_listed_rejections``; all of them in
    ``rejects_path`` as CSV). The import is one transaction: a file that turns out to be
    malformed half-way leaves nothing behind.

    ``attribute_columns`` keeps only those of the other columns as contact attributes (all
    of them when ``None``). ``progress`` is called with the rows done so far after each
    batch is written.

    Raises ``ImportFileError`` for a file that cannot be read at all, ``ValidationError``
    for bad arguments.
    """
    started = time.monotonic()
    if region and region.upper() not in phonenumbers.SUPPORTED_REGIONS:
        raise ValidationError(f"unknown region {region!r}: use a two-letter code such as BR")
    list_name = list_name.strip()
    if not list_name:
        raise ValidationError("the list name must not be blank")
    rejects = RejectsWriter(rejects_path) if rejects_path else None
    try:
        with (
            ContactReader(
                path,
                region=region,
                phone_column=phone_column,
                name_column=name_column,
                encoding=encoding,
            ) as reader,
            transaction.atomic(),
        ):
            if attribute_columns is not None and reader.columns is not None:
                keep = set(attribute_columns)
                reader.columns.attributes = [
                    (at, key) for at, key in reader.columns.attributes if key in keep
                ]
            contact_list, _ = ContactList.objects.get_or_create(name=list_name)
            result = ContactImportResult(
                list_id=contact_list.pk, list_name=contact_list.name, file=reader.describe()
            )
            writer = ContactWriter(list_id=contact_list.pk)
            batches = (copy_payload(b) for b in contact_batches(reader, size=batch_size))
            with ReadAhead(batches, depth=IMPORT_READ_AHEAD) as ahead:
                for batch in ahead:
                    inserted, added = writer.write(batch)
                    _tally(result, batch.rows, batch.rejections, inserted, added)
                    room = max_listed_rejections - len(result.rejections)
                    result.rejections.extend(batch.rejections[: max(room, 0)])
                    if rejects is not None:
                        rejects.write(batch.rejections)
                    if progress is not None:
                        progress(result.rows_total)
    finally:
        if rejects is not None:
            rejects.close()
    result.merged = result.rows_total - result.rejected - result.imported
    result.seconds = time.monotonic() - started
    logger.info(
        "imported %s rows into list %s: %s new, %s merged, %s rejected in %.1fs",
        result.rows_total,
        result.list_id,
        result.imported,
        result.merged,
        result.rejected,
        result.seconds,
    )
    return result


def _tally(
    result: ContactImportResult,
    rows: int,
    rejections: Sequence[Rejection],
    inserted: int,
    added: int,
) -> None:
    result.rows_total += rows
    result.rejected += len(rejections)
    result.imported += inserted
    result.added_to_list += added


# --- campaigns ---------------------------------------------------------------------------------


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
    """Exactly the template's params mapped (``campaigns.params.mapping_validate``), or a
    ``ValidationError`` worded for the operator."""
    try:
        mapping_validate(template, param_mapping)
    except ParamMappingError as exc:
        raise ValidationError(_mapping_error_text(template, exc)) from exc


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
) -> Campaign:
    """Create a draft campaign from a number, one of its WABA's templates and contact lists.

    ``window`` limits sends to a daily window in each recipient's local time (see
    campaigns.zones for how the zone is found); ``time_zone`` is the zone for recipients
    whose number gives none, ``time_zone_attribute`` the contact attribute that overrides.
    """
    if not name.strip():
        raise ValidationError("the campaign name must not be blank")
    number = _phone_number_get(phone_number_id)
    template = _template_get(number=number, name=template_name, language=language)
    lists = _contact_lists_get(list_names)
    param_mapping = param_mapping or {"body": {}}
    param_mapping_validate(template=template, param_mapping=param_mapping)
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
        )
        campaign.lists.set(lists)
    return campaign


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
    if not list_names:
        raise ValidationError("a campaign needs at least one contact list")
    lists = list(ContactList.objects.filter(name__in=list_names))
    missing = sorted(set(list_names) - {cl.name for cl in lists})
    if missing:
        raise ValidationError(f"no contact list named {', '.join(repr(m) for m in missing)}")
    return lists
