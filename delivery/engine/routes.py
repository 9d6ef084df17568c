"""Which endpoint a campaign send goes to: ``/messages`` or the Marketing Messages API.

Meta's routing rule (September 2026): send each template to the endpoint for its latest
category. An account that sends marketing through the Marketing Messages API posts its
MARKETING templates to ``POST /{phone_number_id}/marketing_messages`` and everything else
to ``/messages``; ``Template.category`` is the latest category (the sync and completed
``template_category_update`` callbacks keep it), never an impending one.

Two refusals mean the other endpoint would take the message, and both come back before
Meta sends anything, so sending it there cannot make a duplicate:

* 131063 from ``/messages``: the business turned marketing templates off on Cloud API;
* 131055 from ``/marketing_messages``: the template is not (or no longer) marketing.

``reroute`` names the other endpoint for either, once: the sender tries it at once for
that row (never a third time: an answer from the second endpoint is the row's outcome),
and sends the rest of the campaign's rows there first. The row records where it went
(``Message.send_route``) so the report can count rerouted recipients. Both endpoints
share the number's rate and reserve: the token the first try was granted covers the
second (the refusal sent nothing).
"""

from __future__ import annotations

from campaigns.models import BusinessAccount, Template, TemplateCategory
from delivery.cloud.client import MARKETING_MESSAGES, MESSAGES, ApiError, SendResult

ROUTE_MARKETING = "marketing_messages"
ROUTE_REROUTED_TO_MARKETING = "rerouted_to_marketing_messages"
ROUTE_REROUTED_TO_MESSAGES = "rerouted_to_messages"
MARKETING_DISABLED_ON_CLOUD_API = 131063
NOT_MARKETING = 131055


def endpoint_for(account: BusinessAccount, template: Template) -> str:
    """The endpoint a send of ``template`` goes to first."""
    if account.marketing_messages_api and template.category == TemplateCategory.MARKETING:
        return MARKETING_MESSAGES
    return MESSAGES


def reroute(endpoint: str, result: SendResult) -> str | None:
    """The other endpoint when ``result`` is the refusal that names it, else None."""
    if not isinstance(result, ApiError):
        return None
    if endpoint == MESSAGES and result.code == MARKETING_DISABLED_ON_CLOUD_API:
        return MARKETING_MESSAGES
    if endpoint == MARKETING_MESSAGES and result.code == NOT_MARKETING:
        return MESSAGES
    return None


def route_recorded(first: str, final: str) -> str:
    """``Message.send_route`` for a send first tried at ``first`` and answered at ``final``."""
    if first == final:
        return ROUTE_MARKETING if final == MARKETING_MESSAGES else ""
    return (
        ROUTE_REROUTED_TO_MARKETING if final == MARKETING_MESSAGES else ROUTE_REROUTED_TO_MESSAGES
    )
