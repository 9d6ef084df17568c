"""Where a tracked link sends a person: the campaign's destination, filled in for them.

A campaign's ``link_destination`` is an absolute http(s) URL that may name contact fields
as ``{{field}}`` (``name``, ``phone`` or any key of the contact's attributes). A click
fills each with the contact's value, URL-quoted as a whole (``/``, ``?``, ``&``, ``#`` and
``=`` included: a value can never add a path segment, a parameter or a fragment, nor end
the one it stands in), and, when the campaign asks, adds the UTM parameters the
destination does not set itself. Placeholders may not stand in the scheme or the host: a
contact's field must never choose which site a person is sent to.

    >>> destination_url(
    ...     "https://shop.example.com/sale?c={{city}}#top",
    ...     contact_fields={"city": "São Paulo"}, campaign_name="Black Friday",
    ...     variant_label="B", utm=True,
    ... )
    'https://shop.example.com/sale?c=S%C3%A3o%20Paulo&utm_source=whatsapp&utm_medium=message&utm_campaign=black-friday&utm_content=B#top'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from django.utils.encoding import iri_to_uri
from django.utils.text import slugify

MAX_DESTINATION_CHARS = 2000  # Campaign.link_destination's max_length
# A well-formed placeholder: letters, digits, "_", "-" and "." between double braces.
PLACEHOLDER_RE = re.compile(r"\{\{([A-Za-z0-9_.\-]+)\}\}")
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
# Anything between double braces, to tell a malformed placeholder from a good one.
_BRACED_RE = re.compile(r"\{\{(.*?)\}\}")
_SCHEMES = ("http", "https")
# A character that no URL may carry unencoded: whitespace and the C0/C1 controls.
_UNSAFE_RE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def destination_url(
    destination: str,
    *,
    contact_fields: Mapping[str, str],
    campaign_name: str,
    variant_label: str | None,
    utm: bool,
) -> str:
    """``destination`` for one person: each ``{{field}}`` replaced by its URL-quoted value
    (a field the contact lacks by ""), then the UTM parameters when ``utm``, each only if
    the destination does not set that key already. The fragment stays last; the result is
    ASCII (a non-ASCII host in IDNA, any other character percent-encoded), fit for a
    ``Location`` header."""
    filled = PLACEHOLDER_RE.sub(
        lambda match: quote(contact_fields.get(match.group(1), ""), safe=""), destination
    )
    parts = urlsplit(filled)
    if utm:
        parts = parts._replace(query=_utm_added(parts.query, campaign_name, variant_label))
    return iri_to_uri(urlunsplit(parts._replace(netloc=_ascii_netloc(parts.netloc))))


def link_destination_errors(destination: str) -> list[str]:
    """What is wrong with ``destination`` as a campaign's link destination (``[]``: nothing)."""
    errors: list[str] = []
    if len(destination) > MAX_DESTINATION_CHARS:
        errors.append(f"The link is {len(destination)} characters long; at most 2000 fit.")
    if _UNSAFE_RE.search(destination):
        errors.append("The link may not contain spaces, tabs or line breaks.")
    bad = [name for name in _BRACED_RE.findall(destination) if not _NAME_RE.fullmatch(name)]
    if bad:
        listed = ", ".join("{{" + name + "}}" for name in bad)
        errors.append(f"{listed}: a field's name may only hold letters, digits, '_', '-' and '.'.")
    leftover = _BRACED_RE.sub("", destination)
    if "{{" in leftover or "}}" in leftover:
        errors.append("A placeholder is not closed: write a field as {{field}}.")
    try:
        # Checked with every placeholder standing for a plain word, as a click fills it.
        parts = urlsplit(_BRACED_RE.sub("x", destination))
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        errors.append("The link is not a valid web address.")
        return errors
    if parts.scheme.lower() not in _SCHEMES:
        errors.append("The link must start with https:// (or http://).")
    elif not parts.hostname:
        errors.append("The link must name a site, e.g. https://shop.example.com/.")
    elif "{{" in urlsplit(destination).netloc:
        errors.append("A {{field}} may not be part of the site's name, only of what follows it.")
    return errors


def _utm_added(query: str, campaign_name: str, variant_label: str | None) -> str:
    """``query`` as written, with each UTM parameter it does not set appended."""
    present = {key for key, _ in parse_qsl(query, keep_blank_values=True)}
    wanted = [
        ("utm_source", "whatsapp"),
        ("utm_medium", "message"),
        ("utm_campaign", _campaign_slug(campaign_name)),
    ]
    if variant_label:
        wanted.append(("utm_content", variant_label))
    added = urlencode([(key, value) for key, value in wanted if key not in present])
    if not added:
        return query
    return f"{query}&{added}" if query else added


def _campaign_slug(name: str) -> str:
    """The campaign's name as analytics tools like it: "Black Friday!" -> "black-friday"; a
    name of no Latin letters keeps its own (percent-encoded in the URL)."""
    return slugify(name) or slugify(name, allow_unicode=True)


def _ascii_netloc(netloc: str) -> str:
    """A host typed in Unicode ("café.example") as IDNA ("xn--caf-dma.example")."""
    if netloc.isascii():
        return netloc
    userinfo, at, hostport = netloc.rpartition("@")
    host, colon, port = hostport.partition(":")
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return netloc  # left to iri_to_uri's percent-encoding
    return f"{userinfo}{at}{host}{colon}{port}"
