"""Links to a person's customer page (``whatsblast.admin.customer``), for every list and
page that shows a phone: kept apart from the page so that the lists can link to it and the
page can use the dead-letter page's helpers without the two importing each other."""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

URL_NAME = "wb_customer"


def customer_url(key: str) -> str:
    """The page of the person with this E.164 phone or WhatsApp user id ("" for none)."""
    try:
        return reverse(URL_NAME, args=[key]) if key else ""
    except NoReverseMatch:  # a key with a "/" in it: no such person here
        return ""


def customer_link(key: str | None, text: str | None = None) -> SafeString | str:
    """``key`` (a phone or user id) as a link to its customer page; "-" when empty."""
    url = customer_url(key or "")
    if not url:
        return text or key or "-"
    return format_html(
        '<a class="wb-customer-link" href="{}" title="Everything about this customer">{}</a>',
        url,
        text or key,
    )
