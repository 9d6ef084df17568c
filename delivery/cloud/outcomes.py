"""What a send result means for the engine: a pure mapping from result to ``Outcome``.

Meta says to branch on ``error.code`` (plus ``error_data.details``), never on the HTTP status
or the title, so the code decides whenever there is one; the HTTP status and the transport
only decide when no Graph error body came back. The table follows cloud-api.md §2.3.

Sources of the table: Meta's "WhatsApp error codes" page
(https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes,
Updated 2026-06-18: branch on ``code`` and ``error_data.details``), the older full table with
HTTP statuses (cloud-api.md M-ERRTBL), pywa ``pywa/errors.py`` @0bcf2f1 for 131037 and
131062-131064, and for the 2026 Marketing Messages codes: 131055 "Method not allowed" (a
utility or authentication template sent to ``/marketing_messages``; 360dialog's
expected-errors page) and 131061 (a max-price template sent through ``/messages``;
froggy1014/meta-cloud-api ``docs/marketing-messages.md``), both in shared/meta-2026.md §1.1,
§1.5 and §6. Checked 2026-12 against those: no code of the table is misclassified.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from delivery.cloud.client import Accepted, ApiError, SendResult


class Outcome(StrEnum):
    SENT = "sent"  # accepted by Meta; delivery is reported by webhooks
    THROTTLED = "throttled"  # the number is over its throughput: pause the number
    SPAM_LIMITED = "spam_limited"  # 131048: the number is restricted; halve and hold its rate
    PAIR_LIMITED = "pair_limited"  # too many to this user: reschedule only this message
    USER_CAPPED = "user_capped"  # per-user marketing cap: not again before 24 h
    OPTED_OUT = "opted_out"  # the user stopped marketing: suppress, never retry
    TRANSIENT = "transient"  # never reached Meta, or Meta's temporary trouble: retry w/ backoff
    AMBIGUOUS = "ambiguous"  # may have been sent: reconcile from webhooks, never resend blindly
    PERMANENT = "permanent"  # this recipient cannot get this message: fail it now
    CAMPAIGN_BROKEN = "campaign_broken"  # token, template, account or payload: stop the campaign


# Retrying these cannot help the message (or is forbidden) but the campaign is fine.
_PERMANENT = (
    131026,  # undeliverable: not on WhatsApp, old client, ToS not accepted
    131047,  # re-engagement: outside the 24 h window (free-form sends only)
    131021,  # recipient cannot be the sender
    130472,  # the user's number is part of an experiment
    130497,  # business may not message users in this recipient's country
    132005,  # hydrated text too long: this recipient's values
    132007,  # format/character policy: this recipient's values
    132008,  # a parameter value is invalid: this recipient's values
    137000,  # recipient identity-key hash mismatch
    131062,  # BSUID recipient not supported
)

# Every message of the campaign would fail the same way: stop before burning the audience.
_CAMPAIGN_BROKEN = (
    0,  # AuthException
    3,  # capability or permission
    10,  # permission denied
    33,  # business phone number deleted
    100,  # invalid parameter (request shape)
    190,  # access token expired or invalid
    368,  # temporarily blocked for policy violations
    131005,  # access denied
    131008,  # required parameter missing
    131009,  # parameter value invalid (request shape)
    131030,  # recipient not in the test number's allowed list: a test number, every send fails
    131031,  # account locked
    131037,  # 555 number without an approved display name
    131042,  # payment / eligibility problem
    131045,  # phone registration (certificate) error
    131051,  # unsupported message type
    131052,  # media download error (the campaign's header media)
    131053,  # media upload error
    # Marketing templates turned off on Cloud API: the sender first sends the row once
    # through the Marketing Messages API (delivery.engine.routes); this is the outcome only
    # when that could not be tried.
    131063,
    131064,  # messaging limit reached for template-classification violations
    # "Method not allowed": /marketing_messages refuses a non-marketing template. The sender
    # first sends the row once through /messages (delivery.engine.routes); left over, it
    # means the set-up (template, endpoint) is wrong for every recipient alike.
    131055,
    131061,  # a max-price template sent through /messages: only /marketing_messages takes it
    132000,  # parameter count mismatch with the template
    132001,  # template missing in that language, or not approved
    132012,  # parameter format mismatch
    132015,  # template paused for low quality
    132016,  # template disabled
    132068,  # flow blocked
    132069,  # flow throttled
    133010,  # phone number not registered
    133016,  # register/deregister rate limit: not a send path, so misconfigured
    135000,  # generic user error
)

# Meta's temporary trouble: retry the message with backoff, whatever the HTTP status says.
TRANSIENT_CODES = frozenset(
    (
        1,  # API unknown: invalid request or server error; limited by max attempts
        2,  # service downtime or overload
        131000,  # something went wrong
        131016,  # service unavailable
        133004,  # server temporarily unavailable
    )
)

# Number-wide pressure: pausing the number beats burning every message's attempts.
_THROTTLED = (
    4,  # app-level call limit
    613,  # generic Graph call rate limit
    80007,  # WABA call limit
    130429,  # per-number throughput
    131057,  # account in maintenance mode (throughput upgrade, about a minute)
)

CODE_OUTCOMES: Mapping[int, Outcome] = MappingProxyType(
    {
        **{code: Outcome.PERMANENT for code in _PERMANENT},
        **{code: Outcome.CAMPAIGN_BROKEN for code in _CAMPAIGN_BROKEN},
        **{code: Outcome.TRANSIENT for code in TRANSIENT_CODES},
        **{code: Outcome.THROTTLED for code in _THROTTLED},
        131056: Outcome.PAIR_LIMITED,
        131048: Outcome.SPAM_LIMITED,  # spam rate limit: the number is restricted
        131049: Outcome.USER_CAPPED,
        131050: Outcome.OPTED_OUT,
    }
)

# API permission errors are a whole range (200-299).
_PERMISSION_CODES = range(200, 300)

# For codes that nobody has seen before.
UNKNOWN_CODE_OUTCOME = Outcome.CAMPAIGN_BROKEN

# Waits Meta documents (seconds); used when no Retry-After came.
DOCUMENTED_WAITS: Mapping[int, float] = MappingProxyType(
    {
        131049: 24 * 3600.0,  # per-user marketing cap: at least 24 h
        131057: 60.0,  # maintenance mode: about a minute
    }
)


def classify(result: SendResult) -> Outcome:
    """The engine's action class for one send result. Pure; never raises.

    Unknown error codes become ``CAMPAIGN_BROKEN``: stopping the campaign is recoverable
    (an operator looks, then resumes), while treating a new systemic error as permanent
    would fail the whole audience one message at a time, and treating it as transient would
    spend every message's attempts before dead-lettering all of them.
    """
    if isinstance(result, Accepted):
        return Outcome.SENT
    if result.code is not None:
        return _classify_code(result.code)
    return _classify_without_code(result)


def _classify_code(code: int) -> Outcome:
    outcome = CODE_OUTCOMES.get(code)
    if outcome is not None:
        return outcome
    if code in _PERMISSION_CODES:
        return Outcome.CAMPAIGN_BROKEN
    return UNKNOWN_CODE_OUTCOME


def _classify_without_code(result: ApiError) -> Outcome:
    status = result.http_status
    if status is None:
        # Transport failure: only a request that never left is safe to repeat.
        return Outcome.AMBIGUOUS if result.may_have_reached_meta else Outcome.TRANSIENT
    if 200 <= status < 300:
        # Meta said yes but the body had no message id: it may well be on its way.
        return Outcome.AMBIGUOUS
    if status == 429:
        return Outcome.THROTTLED
    if status == 504:
        # A gateway gave up waiting: the request may have been processed behind it.
        return Outcome.AMBIGUOUS
    if status >= 500:
        return Outcome.TRANSIENT
    # 4xx without a Graph body (wrong base URL, a proxy refusing): every send would fail.
    return UNKNOWN_CODE_OUTCOME


def wait_hint_s(result: SendResult) -> float | None:
    """How long to hold off before trying this message again, when known."""
    if isinstance(result, Accepted):
        return None
    if result.retry_after_s is not None:
        return result.retry_after_s
    if result.code is None:
        return None
    return DOCUMENTED_WAITS.get(result.code)
