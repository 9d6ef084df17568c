"""The admin: every page of the product for marketing, support and operators.

Django's autodiscovery imports this package; each module registers the pages of one part.
"""

from whatsblast.admin import (  # noqa: F401 - imported for their registrations
    api_keys,
    campaigns,
    catalogue,
    contacts,
    conversions,
    dead_letters,
    event_subscriptions,
    journeys,
    messages,
    numbers,
    segments,
    site,
    uploads,
    webhooks,
)
