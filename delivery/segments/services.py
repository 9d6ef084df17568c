"""Segments: saving one, and counting and sampling the contacts its rules match now."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from campaigns.models import Campaign, CampaignStatus, ContactList, Segment
from delivery.segments.rules import (
    AllOf,
    AnyOf,
    CampaignOutcome,
    InList,
    Not,
    Rule,
    RuleError,
    rules_parse,
)
from delivery.segments.sql import SegmentSql, segment_sql


def rules_json(rules: object) -> object:
    """Rules given as JSON text parsed, or given already parsed, as they are."""
    if not isinstance(rules, str):
        return rules
    try:
        return json.loads(rules)
    except json.JSONDecodeError as exc:
        raise RuleError(
            "rules", f"is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc


def segment_compile(rules: object, *, prefix: str = "s") -> SegmentSql:
    """The SQL of ``rules``, every list and campaign they name checked to exist; its
    parameters are named ``{prefix}0``, ``{prefix}1``, …"""
    rule = rules_parse(rules_json(rules))
    names = _walk(rule, "rules")
    list_ids = dict(
        ContactList.objects.filter(name__in=[n for n, _ in names["lists"]]).values_list(
            "name", "id"
        )
    )
    known = set(
        Campaign.objects.filter(pk__in=[c for c, _ in names["campaigns"]]).values_list(
            "pk", flat=True
        )
    )
    missing = [
        RuleError(path, f"no contact list is named {name!r}")
        for name, path in names["lists"]
        if name not in list_ids
    ] + [
        RuleError(path, f"no campaign has the id {campaign_id}")
        for campaign_id, path in names["campaigns"]
        if campaign_id not in known
    ]
    if missing:
        raise RuleError.of(missing)
    return segment_sql(rule, list_ids=list_ids, prefix=prefix)


def _walk(rule: Rule, path: str) -> dict[str, list[tuple[Any, str]]]:
    """The lists and campaigns the rules name, with each one's path."""
    found: dict[str, list[tuple[Any, str]]] = {"lists": [], "campaigns": []}

    def visit(node: Rule, at: str) -> None:
        if isinstance(node, AllOf | AnyOf):
            kind = "all" if isinstance(node, AllOf) else "any"
            for i, child in enumerate(node.rules):
                visit(child, f"{at}.{kind}[{i}]")
        elif isinstance(node, Not):
            visit(node.rule, f"{at}.not")
        elif isinstance(node, InList):
            found["lists"].append((node.list_name, f"{at}.list"))
        elif isinstance(node, CampaignOutcome):
            found["campaigns"].append((node.campaign_id, f"{at}.campaign"))

    visit(rule, path)
    return found


@dataclass(frozen=True)
class SegmentMatch:
    count: int
    sample: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "sample": self.sample}


def segment_match(rules: object, *, sample: int = 0) -> SegmentMatch:
    """How many contacts ``rules`` match now, and the first ``sample`` of them."""
    compiled = segment_compile(rules)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM campaigns_contact AS c WHERE {compiled.condition}",  # noqa: S608 - segment_sql binds every value
            compiled.params,
        )
        (count,) = cursor.fetchone()
        rows: list[dict[str, Any]] = []
        if sample:
            cursor.execute(
                "SELECT c.id, c.phone, c.user_id, c.name FROM campaigns_contact AS c"  # noqa: S608
                f" WHERE {compiled.condition} ORDER BY c.id LIMIT %(sample_limit)s",
                {**compiled.params, "sample_limit": sample},
            )
            rows = [
                {"id": pk, "phone": phone, "user_id": user_id, "name": name}
                for pk, phone, user_id, name in cursor.fetchall()
            ]
    return SegmentMatch(int(count), rows)


def segments_in_use(segments: Sequence[Segment]) -> list[str]:
    """What keeps ``segments`` from being deleted: each draft or scheduled campaign that
    includes or leaves one out (deleting it would change whom that campaign sends to)."""
    pending = (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED)
    uses = []
    for segment in segments:
        for campaign in Campaign.objects.filter(status__in=pending, segments=segment):
            uses.append(f"Campaign “{campaign}” ({campaign.status}) sends to “{segment}”")
        for campaign in Campaign.objects.filter(status__in=pending, exclude_segments=segment):
            uses.append(f"Campaign “{campaign}” ({campaign.status}) leaves out “{segment}”")
    return uses


def segment_save(*, name: str, rules: object, description: str = "") -> Segment:
    """Create or replace the segment ``name`` with ``rules``, checked before anything is
    saved (a bad rule raises ``RuleError`` and changes nothing)."""
    name = name.strip()
    if not name:
        raise RuleError("name", "a segment needs a name")
    parsed_rules = rules_json(rules)
    segment_compile(parsed_rules)  # raises RuleError naming the rule
    segment, _ = Segment.objects.update_or_create(
        name=name, defaults={"rules": parsed_rules, "description": description}
    )
    return segment
