"""An A/B test at launch: which arm each recipient is in, and what the arms send.

A campaign with ``ab_test_percent`` > 0 and 2-5 variants (``CampaignVariant``: a template
and its mapping) splits that share of its audience between the variants: each recipient
the campaign sends to is hashed with the campaign (``contact_hash_sql``, seeded apart from
the holdout's draw), is in the test when the hash's last four digits fall under the share,
and then in arm ``(hash / 10000) % variants``. The
split is even in expectation and the same every time it is computed, so a repeated launch,
which inserts nothing new, agrees with the first. The launch's one INSERT carries it:
``arm_join`` adds ``ab.arm`` per row, the template and params expressions choose by it,
and the row's ``variant`` records it. Recipients outside the test (the remainder) are
inserted held, with the campaign's own template and params, until the winner is decided
(delivery.campaigns.ab_tests) and their params are rendered again. A recipient is in exactly
one arm, or in the remainder: the campaign's unique (campaign, to) index holds one row per
recipient whatever the arms.

Every other guarantee is the engine's and holds unchanged: the rows are ordinary pending
rows, claimed, paced, capped, windowed and settled like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from campaigns.catalogue.params import mapping_validate, params_sql
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import Campaign, CampaignVariant, Template, TemplateStatus
from delivery.campaigns.canary import HOLD_AT
from delivery.campaigns.skips import contact_hash_sql

MIN_VARIANTS = 2
MAX_VARIANTS = 5
# Added to the campaign's id to seed the arm draw: the holdout's draw uses the id itself.
ARM_SEED_OFFSET = 7919


def campaign_variants(campaign: Campaign) -> list[CampaignVariant]:
    """The campaign's variants in order (A first), templates loaded."""
    return list(campaign.variants.select_related("template").order_by("position"))


def variants_errors(
    campaign: Campaign, variants: Sequence[tuple[Template, dict[str, Any]]]
) -> list[str]:
    """Why the campaign's A/B test cannot run with ``variants`` (template, mapping), in
    order; [] when it can (or when the campaign runs no test)."""
    if not campaign.ab_test_percent:
        return []
    errors: list[str] = []
    if not MIN_VARIANTS <= len(variants) <= MAX_VARIANTS:
        errors.append(
            f"an A/B test has {MIN_VARIANTS} to {MAX_VARIANTS} variants, this one "
            f"has {len(variants)}"
        )
    if campaign.canary_size:
        errors.append(
            "an A/B test already sends to a share first: turn the canary off, or the test"
        )
    if campaign.languages:
        errors.append("an A/B test compares single-language templates: leave languages empty")
    account_id = campaign.phone_number.account_id
    for position, (template, mapping) in enumerate(variants):
        label = f"variant {'ABCDE'[position] if position < MAX_VARIANTS else position + 1}"
        if template.account_id != account_id:
            errors.append(f"{label}: template {template} belongs to another business account")
            continue
        if template.status != TemplateStatus.APPROVED:
            errors.append(f"{label}: template {template} is {template.status}, not APPROVED")
            continue
        unusable = template_unusable_reasons(template)
        if unusable:
            errors.append(f"{label}: template {template} cannot be sent: {'; '.join(unusable)}")
            continue
        try:
            mapping_validate(template, mapping)
        except ValueError as exc:
            errors.append(f"{label}: {exc}")
    return errors


@dataclass(frozen=True)
class ArmPlan:
    """The launch statement's fragments for a campaign's A/B test."""

    arm_join: str
    template_expr: str
    params_expr: str
    # Whether recipients outside the test are held for the winner (a share under 100%).
    holds_remainder: bool
    params: dict[str, Any]

    def next_attempt(self, expr: str) -> str:
        """``expr`` for rows in an arm (and skipped ones); the hold for the remainder."""
        if not self.holds_remainder:
            return expr
        return f"CASE WHEN skip.reason = '' AND ab.arm IS NULL THEN %(ab_hold)s ELSE {expr} END"


def named_params_sql(
    template: Template, mapping: dict[str, Any], prefix: str, alias: str = "c"
) -> tuple[str, dict[str, Any]]:
    """``params_sql`` with its positional placeholders named ``{prefix}0``, … so the
    expression can sit beside a statement's own named parameters."""
    expr, values = params_sql(template, mapping, alias)
    named: dict[str, Any] = {}
    for index, value in enumerate(values):
        expr = expr.replace("%s", f"%({prefix}{index})s", 1)
        named[f"{prefix}{index}"] = value
    return expr, named


def arm_plan(
    campaign: Campaign, variants: Sequence[CampaignVariant], *, default_params_expr: str
) -> ArmPlan:
    """The fragments that put each recipient in an arm (see the module's docstring);
    ``default_params_expr`` renders the campaign's own mapping (the remainder's)."""
    share_bp = round(float(campaign.ab_test_percent) * 100)
    hashed = contact_hash_sql("c", "%(ab_seed)s")
    # In the test when the hash's last four digits fall under the share; the arm from its
    # higher digits, so the two are independent. The arm is the variant's position.
    arm_join = (
        "CROSS JOIN LATERAL (SELECT CASE"
        f" WHEN skip.reason = '' AND {hashed} %% 10000 < %(ab_share_bp)s"
        f" THEN (%(ab_positions)s::smallint[])[({hashed} / 10000) %% %(ab_arms)s + 1]"
        " END AS arm) AS ab"
    )
    params: dict[str, Any] = {
        "ab_seed": int(campaign.pk) + ARM_SEED_OFFSET,
        "ab_share_bp": share_bp,
        "ab_arms": len(variants),
        "ab_positions": [int(v.position) for v in variants],
        "ab_hold": HOLD_AT,
    }
    templates = []
    renders = []
    for variant in variants:
        position = int(variant.position)
        params[f"ab_t{position}"] = variant.template_id
        templates.append(f"WHEN {position} THEN %(ab_t{position})s")
        expr, named = named_params_sql(variant.template, variant.param_mapping, f"ab{position}p")
        params.update(named)
        renders.append(f"WHEN {position} THEN {expr}")
    return ArmPlan(
        arm_join=arm_join,
        template_expr=f"CASE ab.arm {' '.join(templates)} ELSE %(template_id)s END",
        params_expr=f"CASE ab.arm {' '.join(renders)} ELSE {default_params_expr} END",
        holds_remainder=share_bp < 10_000,
        params=params,
    )
