"""Who a campaign skips, and why: one definition for the launch, the pre-flight, the canary
and a sender pool.

A launch writes a row for every distinct contact on the campaign's lists; a row that will
not go out is ``skipped`` with its reason, so the report accounts for everyone. The reasons,
first match wins:

1. the contact opted out;
2. the campaign leaves them out: a suppression list, an excluded list or segment
   (``delivery.campaigns.audience``; the reason names which);
3. a marketing template to a US user: Meta does not deliver those (since 2025-04-01; "+1
   and a US area code", or a user id issued for a US number). Canada and the Caribbean
   share +1 and are sent (``campaigns.audience.regions``);
4. a campaign in many languages with no approved version for the contact's language and
   no fallback (``delivery.campaigns.languages``);
5. a contact known only by its user id, for a template Meta refuses to send to user ids
   (error 131062: copy-code buttons and authentication templates; Meta's "Business-scoped
   user IDs" page), caught here rather than by a failed send;
6. the campaign's holdout: ``holdout_percent`` of those the rules above would send, drawn
   by a hash of the contact and the campaign (the same contacts whenever it is asked, so
   the pre-flight, the launch and a re-launch agree), deliberately not sent so that
   conversions can be compared (delivery.engagement.roi). Last, so the holdout is drawn
   from exactly the people who would otherwise get the message.

``SkipRules.reason_sql`` is the one SQL expression of these rules; every statement that asks
"who will be sent" uses it or ``sendable_sql`` over the contact alias ``c``, with
``params`` bound beside its own. The US test compares a contact's recipient's first five
characters with the bound list of US area prefixes (``= ANY`` of a constant array is a hash
lookup from PostgreSQL 14), so the rule costs one probe a row and needs no stored column.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from campaigns.audience.regions import us_area_prefixes
from campaigns.models import Campaign, Template, TemplateCategory
from delivery.campaigns.audience import Audience, Exclusion
from delivery.campaigns.languages import NO_LANGUAGE, LanguagePlan, campaign_languages

OPTED_OUT = "opted out"
US_NUMBER = "US number: Meta does not deliver marketing templates to US numbers"
US_USER_ID = "US user id: Meta does not deliver marketing templates to US users"
USER_ID_REFUSED = "user id only: Meta does not send this template to user ids (131062)"
# Deliberately not sent: the campaign's holdout, kept to measure lift (delivery.engagement).
HOLDOUT = "holdout: deliberately not sent, to measure lift"
REASONS = (OPTED_OUT, US_NUMBER, US_USER_ID, NO_LANGUAGE, USER_ID_REFUSED, HOLDOUT)

# Button kinds Meta refuses to send to a user id (131062); authentication templates too.
USER_ID_REFUSED_BUTTONS = frozenset({"COPY_CODE", "OTP"})


def user_id_refusal(template: Template) -> str:
    """Why Meta would refuse ``template`` for a recipient known only by a user id, or ''."""
    if template.category == TemplateCategory.AUTHENTICATION:
        return "authentication templates"
    for component in template.components or []:
        if str(component.get("type", "")).upper() != "BUTTONS":
            continue
        for button in component.get("buttons") or []:
            kind = str(button.get("type", "")).upper()
            if kind in USER_ID_REFUSED_BUTTONS:
                return f"{kind.replace('_', '-').lower()} buttons"
    return ""


def contact_hash_sql(alias: str, seed: str) -> str:
    """A contact's hash for the draw seeded ``seed``: uniform, non-negative and the same
    every time it is asked (PostgreSQL's 64-bit hash of the id; the mask drops the sign).
    A/B arms draw with another seed than the holdout, so the two are independent."""
    return f"(hashtextextended({alias}.id::text, {seed}) & 9223372036854775807)"


def holdout_draw_sql(alias: str, seed: str) -> str:
    """The contact's draw, 0-9999: under a share in basis points means "in"."""
    return f"({contact_hash_sql(alias, seed)} %% 10000)"


@dataclass(frozen=True)
class SkipRules:
    """The skip rules for one template (see the module's docstring)."""

    us_blocked: bool  # a marketing template
    user_ids_refused: bool  # Meta refuses the template for user-id-only recipients
    # Whom the campaign leaves out, and the audience's parameters they need.
    exclusions: tuple[Exclusion, ...] = ()
    audience_params: dict[str, Any] = field(default_factory=dict)
    # A campaign in many languages: how each contact's language is chosen.
    languages: LanguagePlan | None = None
    # The holdout in basis points (0: none) and the campaign's id, which seeds its draw.
    holdout_bp: int = 0
    holdout_seed: int = 0

    @classmethod
    def for_template(
        cls,
        template: Template,
        audience: Audience | None = None,
        languages: LanguagePlan | None = None,
    ) -> SkipRules:
        return cls(
            us_blocked=template.category == TemplateCategory.MARKETING,
            user_ids_refused=bool(user_id_refusal(template)),
            exclusions=audience.exclusions if audience else (),
            audience_params=dict(audience.params) if audience else {},
            languages=languages,
        )

    @classmethod
    def for_campaign(cls, campaign: Campaign, audience: Audience | None = None) -> SkipRules:
        """The rules of ``campaign``: its template's, its audience's and its languages'.

        Raises ``LanguageError`` when its fallback language has no sendable version.
        """
        rules = cls.for_template(campaign.template, audience, campaign_languages(campaign))
        holdout_bp = round(float(campaign.holdout_percent or 0) * 100)
        return replace(rules, holdout_bp=holdout_bp, holdout_seed=int(campaign.pk or 0))

    @property
    def params(self) -> dict[str, Any]:
        return {
            **self.audience_params,
            **(self.languages.params if self.languages else {}),
            "skip_us_blocked": self.us_blocked,
            "skip_us_prefixes": list(us_area_prefixes()),
            "skip_user_ids_refused": self.user_ids_refused,
            "skip_holdout_bp": self.holdout_bp,
            "skip_holdout_seed": self.holdout_seed,
        }

    def reason_sql(self, alias: str = "c") -> str:
        """The row's skip reason, '' when it goes out, over the contact alias ``alias``."""
        c = alias
        if self.exclusions and alias != "c":
            raise ValueError("exclusions are written over the contact alias c")
        left_out = "".join(
            f"\n            WHEN ({e.condition}) IS TRUE THEN %({e.reason_param})s"
            for e in self.exclusions
        )
        language = ""
        if self.languages is not None:
            chosen = self.languages.language_sql(c)
            language = f"\n            WHEN ({chosen}) IS NULL THEN '{NO_LANGUAGE}'"
        return f"""CASE
            WHEN {c}.opted_out_at IS NOT NULL THEN '{OPTED_OUT}'{left_out}
            WHEN %(skip_us_blocked)s AND {c}.phone IS NOT NULL
                 AND left({c}.phone, 5) = ANY(%(skip_us_prefixes)s::text[])
                 THEN '{US_NUMBER}'
            WHEN %(skip_us_blocked)s AND {c}.phone IS NULL AND {c}.user_id LIKE 'US.%%'
                 THEN '{US_USER_ID}'{language}
            WHEN %(skip_user_ids_refused)s AND {c}.phone IS NULL THEN '{USER_ID_REFUSED}'
            WHEN %(skip_holdout_bp)s > 0
                 AND {holdout_draw_sql(c, "%(skip_holdout_seed)s")} < %(skip_holdout_bp)s
                 THEN '{HOLDOUT}'
            ELSE '' END"""

    def sendable_sql(self, alias: str = "c") -> str:
        """True for a contact the campaign sends to."""
        return f"({self.reason_sql(alias)}) = ''"
