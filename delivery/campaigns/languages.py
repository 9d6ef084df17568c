"""One campaign in many languages: which approved version each recipient is sent.

A campaign that sends "each recipient their language" names a template by its name; every
approved version of that name in the account whose parameters the campaign's mapping fits
is a language it can send (the campaign's own template always is). Each recipient's
language comes from a contact field, else the number's country, else the campaign's
fallback (campaigns.catalogue.languages has the rules); one with none is skipped with
``NO_LANGUAGE``.

``LanguagePlan.language_sql`` is those rules as one SQL expression over the contact alias
``c``: two lookups in a bound JSON object (the field's value whole, then its primary
subtag) and a ``LIKE ANY`` over each language's bound country prefixes, so the launch
stays one set-based INSERT and the pre-flight counts what the launch will write. The
launch stores the chosen version's id in ``Message.template_id``; the sender sends each
row in its row's language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from campaigns.audience.regions import region_phone_prefixes
from campaigns.catalogue.languages import COUNTRY_LANGUAGES, country_languages, language_keys
from campaigns.catalogue.params import ParamMappingError, mapping_validate
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import Campaign, Template, TemplateStatus

NO_LANGUAGE = "no approved language for this contact"


class LanguageError(ValueError):
    """The campaign's languages cannot be sent as set (a fallback with no approved version)."""


@dataclass(frozen=True)
class LanguagePlan:
    """The versions a campaign sends and how each recipient's is chosen."""

    contact_field: str  # the contact attribute read first ('' = by country only)
    fallback: str  # the language for the rest ('' = they are skipped)
    templates: dict[str, int]  # language -> the version's Template id
    left_out: dict[str, str] = field(default_factory=dict)  # language -> why not sent
    keys: dict[str, str] = field(default_factory=dict)  # normalized value -> language
    countries: dict[str, list[str]] = field(default_factory=dict)  # language -> LIKE patterns

    @property
    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "lang_field": self.contact_field,
            "lang_keys": _json(self.keys),
            "lang_fallback": self.fallback or None,
            "lang_templates": _json({k: str(v) for k, v in self.templates.items()}),
        }
        for index, (language, patterns) in enumerate(sorted(self.countries.items())):
            params[f"lang_c{index}"] = patterns
            params[f"lang_l{index}"] = language
        return params

    def language_sql(self, alias: str = "c") -> str:
        """The recipient's language, NULL for none (then ``NO_LANGUAGE`` skips them)."""
        c = alias
        choices: list[str] = []
        if self.contact_field:
            value = (
                f"replace(lower(btrim(coalesce({c}.attributes ->> %(lang_field)s, ''))), '-', '_')"
            )
            choices.append(f"(%(lang_keys)s::jsonb ->> {value})")
            choices.append(f"(%(lang_keys)s::jsonb ->> split_part({value}, '_', 1))")
        if self.countries:
            whens = "".join(
                f" WHEN coalesce({c}.phone, {c}.user_id) LIKE ANY(%(lang_c{i})s::text[])"
                f" THEN %(lang_l{i})s::text"
                for i in range(len(self.countries))
            )
            choices.append(f"(CASE{whens} END)")
        choices.append("%(lang_fallback)s::text")
        return f"coalesce({', '.join(choices)})"

    def template_id_sql(self, alias: str = "c") -> str:
        """The row's version (the campaign's own template for a skipped row)."""
        return (
            f"coalesce((%(lang_templates)s::jsonb ->> ({self.language_sql(alias)}))::bigint,"
            " %(template_id)s)"
        )


def campaign_languages(campaign: Campaign) -> LanguagePlan | None:
    """The campaign's language plan; None for a campaign in its template's one language."""
    if not campaign.languages:
        return None
    template = campaign.template
    versions = Template.objects.filter(account_id=template.account_id, name=template.name)
    templates: dict[str, int] = {template.language: template.pk}
    left_out: dict[str, str] = {}
    for version in versions.order_by("language"):
        if version.pk == template.pk:
            continue
        reason = _unsendable(version, campaign.param_mapping)
        if reason:
            left_out[version.language] = reason
        else:
            templates[version.language] = version.pk
    fallback = campaign.language_fallback.strip()
    if fallback and fallback not in templates:
        raise LanguageError(
            f"the fallback language {fallback} has no approved version of {template.name} "
            f"that the mapping fits (approved: {', '.join(sorted(templates))})"
        )
    by_country = country_languages(_regions(templates), templates)
    countries: dict[str, list[str]] = {}
    for region, language in sorted(by_country.items()):
        patterns = [f"{prefix}%" for prefix in region_phone_prefixes(region)]
        countries.setdefault(language, []).extend([*patterns, f"{region}.%"])
    return LanguagePlan(
        contact_field=campaign.language_field.strip(),
        fallback=fallback,
        templates=templates,
        left_out=left_out,
        keys=language_keys(templates),
        countries=countries,
    )


def _unsendable(version: Template, mapping: dict[str, Any]) -> str:
    if version.status != TemplateStatus.APPROVED:
        return f"{version.status.lower()}, not approved"
    reasons = template_unusable_reasons(version)
    if reasons:
        return "; ".join(reasons)
    try:
        mapping_validate(version, mapping)
    except ParamMappingError as exc:
        return f"its parameters differ: {exc}"
    return ""


def _regions(templates: dict[str, int]) -> list[str]:
    """The countries a language could be chosen for by the number."""
    regions = set(COUNTRY_LANGUAGES)
    regions.update(lang.split("_", 1)[1].upper() for lang in templates if "_" in lang)
    return sorted(regions)


def _json(value: dict[str, str]) -> str:
    return json.dumps(value, sort_keys=True)
