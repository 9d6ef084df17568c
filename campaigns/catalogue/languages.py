"""Which of a template's approved languages a recipient reads (pure, no I/O).

Meta approves a template per language (``pt_BR``, ``es``, ``es_MX``, ``en_US``…). A
campaign in many languages sends each recipient one of them, chosen:

1. from a contact field (``language`` / ``locale``): ``pt_BR``, ``pt-br`` and ``PT_br``
   are the same language; ``pt`` or ``pt_PT`` take the template's only Portuguese when
   there is no exact match;
2. else from the number's country: a version written for that country (``es_MX`` for
   Mexico), else one in the country's language (``COUNTRY_LANGUAGES``: Mexico reads
   ``es``, so ``es`` or ``es_ES``);
3. else the campaign's fallback language, or no language at all (the recipient is skipped).

``language_keys`` and ``country_languages`` turn these rules into two lookup tables that
the launch's SQL reads per row (delivery.campaigns.languages).
"""

from __future__ import annotations

from collections.abc import Iterable

# The languages a country's customers are written to in, most likely first: the main
# markets of WhatsApp Business. A country not here is placed by the contact field or the
# fallback only.
COUNTRY_LANGUAGES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("AR", "BO", "CL", "CO", "CR", "CU", "DO", "EC", "ES", "GT", "HN", "MX", "NI", "PA",
         "PE", "PR", "PY", "SV", "UY", "VE"),
        ("es",),
    ),
    **dict.fromkeys(("BR", "PT", "AO", "MZ"), ("pt",)),
    **dict.fromkeys(
        ("US", "GB", "CA", "AU", "NZ", "IE", "ZA", "NG", "KE", "GH", "SG", "PH", "JM", "TT",
         "UG", "TZ", "ZW"),
        ("en",),
    ),
    **dict.fromkeys(
        ("AE", "SA", "QA", "KW", "BH", "OM", "EG", "JO", "LB", "MA", "DZ", "TN", "IQ", "LY"),
        ("ar", "en"),
    ),
    "IN": ("en", "hi"),
    "PK": ("ur", "en"),
    "BD": ("bn", "en"),
    "FR": ("fr",),
    "BE": ("fr", "nl"),
    "CH": ("de", "fr", "it"),
    "DE": ("de",),
    "AT": ("de",),
    "IT": ("it",),
    "NL": ("nl",),
    "ID": ("id",),
    "MY": ("ms", "en"),
    "TR": ("tr",),
    "RU": ("ru",),
    "UA": ("uk", "ru"),
    "PL": ("pl",),
    "RO": ("ro",),
    "GR": ("el",),
    "IL": ("he", "en"),
    "VN": ("vi",),
    "TH": ("th",),
    "CN": ("zh_CN",),
    "TW": ("zh_TW",),
    "HK": ("zh_HK", "en"),
    "JP": ("ja",),
    "KR": ("ko",),
    "SE": ("sv",),
    "NO": ("nb",),
    "DK": ("da",),
    "FI": ("fi",),
    "CZ": ("cs",),
    "HU": ("hu",),
}  # fmt: skip


def language_normalize(value: str) -> str:
    """``"pt-BR "`` → ``"pt_br"``: the form contact fields are compared in."""
    return value.strip().lower().replace("-", "_")


def _primary(language: str) -> str:
    return language_normalize(language).split("_", 1)[0]


def _region(language: str) -> str:
    parts = language_normalize(language).split("_", 1)
    return parts[1].upper() if len(parts) == 2 else ""


def _by_primary(languages: Iterable[str]) -> dict[str, str]:
    """Each primary subtag → the version a bare ``pt`` means: ``pt`` itself when approved,
    else the first regional one in order (``pt_BR`` before ``pt_PT``)."""
    chosen: dict[str, str] = {}
    for language in sorted(languages, key=lambda lang: (_region(lang) != "", lang)):
        chosen.setdefault(_primary(language), language)
    return chosen


def language_keys(languages: Iterable[str]) -> dict[str, str]:
    """Normalized contact values → approved language.

    Every approved language under its own name, and each primary subtag (``pt``) under the
    version it means. The launch looks a value up whole, then by its primary subtag.
    """
    languages = list(languages)
    keys = {language_normalize(language): language for language in languages}
    for primary, language in _by_primary(languages).items():
        keys.setdefault(primary, language)
    return keys


def language_match(value: str, languages: Iterable[str]) -> str | None:
    """The approved language a contact's value names, or None (as the launch's SQL does)."""
    keys = language_keys(languages)
    normalized = language_normalize(value)
    return keys.get(normalized) or keys.get(normalized.split("_", 1)[0])


def country_languages(regions: Iterable[str], languages: Iterable[str]) -> dict[str, str]:
    """Country (``"MX"``) → the approved language its numbers get, for each country that
    has one: a version for that country in one of its languages (``es_MX``; ``en_US`` for
    the US but not ``es_US``), else one in the country's languages in order."""
    languages = list(languages)
    by_primary = _by_primary(languages)
    chosen: dict[str, str] = {}
    for region in regions:
        spoken = COUNTRY_LANGUAGES.get(region, ())
        primaries = {_primary(language) for language in spoken}
        local = [
            language
            for language in sorted(languages)
            if _region(language) == region and (not spoken or _primary(language) in primaries)
        ]
        if local:
            chosen[region] = local[0]
            continue
        for wanted in spoken:
            exact = [lang for lang in languages if language_normalize(lang) == wanted.lower()]
            found = exact[0] if exact else by_primary.get(wanted) if "_" not in wanted else None
            if found:
                chosen[region] = found
                break
    return chosen
