"""Must show: a campaign with a holdout, sent on the simulator, then conversions reported
through the API over real HTTP, give the revenue, cost, return and lift a person computes
by hand.

100 people on the list, ``holdout_percent=20``: the launch draws about a fifth of them
(a hash of contact and campaign, so the exact count H is read, then used) and skips them
as the holdout; the other S = 100 - H are sent and delivered (signed callbacks from the
simulator to the live server, each priced "regular", category marketing).

One batch of conversions is posted (``Idempotency-Key: spring-orders``), T the sent people
and C the holdout, both in phone order:

====  ======  ==========  ====================  ===============================
item  who     event       value                 attributed
====  ======  ==========  ====================  ===============================
0     T[0]    purchase    120.00 USD            T[0]'s message, delivered
1     T[0]    purchase    30.00 USD             T[0]'s message, delivered
2     T[1]    purchase    45.50 USD             T[1]'s message, delivered
3     T[2]    signup      (none)                T[2]'s message, delivered
4     T[3]    purchase    19.90 USD (as "usd")  T[3]'s message, delivered
5     C[0]    purchase    80.00 USD             C[0]'s holdout row, holdout
6     C[1]    signup      (none)                C[1]'s holdout row, holdout
7     T[4]    purchase    55.00 USD, 2 h        nothing: before the message, outside
                          before the launch     the window that ends at the conversion
====  ======  ==========  ====================  ===============================

then the same batch again with the same key: eight duplicates, nothing stored twice.

By hand:

- attributed conversions 5 (items 0-4); revenue 120.00 + 30.00 + 45.50 + 19.90 = 215.40
  USD (the holdout's 80.00 is a control conversion, never revenue; item 7 is nobody's);
  holdout conversions 2;
- revenue per message = 215.40 / S; cost = S charged messages at the rate card's +55
  marketing price 0.0625 USD (the "*" row's 0.1000 does not apply) = 0.0625 S; return on
  spend = 215.40 / (0.0625 S) = 3446.4 / S;
- lift, any conversion within the 7 days from the launch: treated 4 of S (T[0..3]; T[4]'s
  came before the launch), control 2 of H; difference 4/S - 2/H. Its 95 % interval is
  compared with Newcombe's hybrid score method (method 10 of Newcombe 1998) written out
  here from Wilson's intervals, itself checked against two rows of that paper's Table II.

The campaign's report shows these figures and its export each message's own conversions
(count, value, currency): the holdout's are never a message's.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from datetime import timedelta
from decimal import Decimal
from statistics import NormalDist
from typing import Any

import pytest
import requests
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from campaigns.models import CampaignStatus, RateCard
from delivery.api.keys import api_key_create
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.skips import HOLDOUT
from delivery.engagement.roi import campaign_roi
from delivery.models import Conversion, Message
from tests.engine_support import (
    campaign_on,
    number_on,
    report_figure,
    settle,
    simulator_calling,
)
from tests.ui.support import role_user
from tests.webhooks.support import APP_SECRET

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 100
PRICE = Decimal("0.0625")
Z95 = NormalDist().inv_cdf(0.975)  # 1.959964


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson's score interval (Wilson 1927) for successes / n at 95 %."""
    p = successes / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 / (1 + Z95**2 / n) * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n))
    return centre - half, centre + half


def newcombe(x1: int, n1: int, x2: int, n2: int) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p1 - p2 (Newcombe 1998, method 10):
    low = d - sqrt((p1 - l1)^2 + (u2 - p2)^2), high = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)."""
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson(x1, n1)
    l2, u2 = wilson(x2, n2)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt(
        (u1 - p1) ** 2 + (p2 - l2) ** 2
    )


def test_the_written_out_newcombe_interval_matches_the_paper() -> None:
    # Newcombe RG (1998), Statistics in Medicine 17:873-890, Table II, method 10:
    # 56/70 - 48/80 -> (0.0524, 0.3339); 9/10 - 3/10 -> (0.1705, 0.8090).
    low, high = newcombe(56, 70, 48, 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    low, high = newcombe(9, 10, 3, 10)
    assert (round(low, 4), round(high, 4)) == (0.1705, 0.8090)


def points(difference: float) -> str:
    """A difference of two rates in percentage points, as the report writes it."""
    value = round(difference * 100, 1)
    sign = "+" if value > 0 else "\u2212" if value < 0 else "\u00b1"
    return f"{sign}{abs(value)} points"


def post(url: str, key: str, items: list[dict[str, Any]], idempotency: str) -> dict[str, Any]:
    answer = requests.post(
        url,
        data=json.dumps({"conversions": items}),
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency,
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[:500]
    body: dict[str, Any] = answer.json()
    return body


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0, WHATSAPP_APP_SECRET=APP_SECRET)
def test_holdout_conversions_revenue_cost_return_and_lift_by_hand(live_server: Any) -> None:
    RateCard.objects.create(country_prefix="+55", category="marketing", price=PRICE)
    RateCard.objects.create(country_prefix="*", category="marketing", price=Decimal("0.1"))
    with simulator_calling(live_server, APP_SECRET, seed=5) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = campaign_on(
            sim, number, recipients=RECIPIENTS, holdout_percent=20, attribution_days=7
        )
        campaign_start(campaign=campaign)
        settle(sim)
        sent_to = {
            "+" + json.loads(r["body"])["to"].lstrip("+")
            for r in sim.records(bodies=True)
            if r.get("body")
        }
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.COMPLETED
    assert campaign.started_at is not None

    rows = list(Message.objects.filter(campaign=campaign).select_related("contact"))
    assert len(rows) == RECIPIENTS
    treated_rows = sorted((m for m in rows if m.status == "delivered"), key=lambda m: m.to)
    holdout_rows = sorted((m for m in rows if m.status == "skipped"), key=lambda m: m.to)
    sent, held = len(treated_rows), len(holdout_rows)
    assert sent + held == RECIPIENTS  # every row delivered or held out, nothing else
    assert {m.skip_reason for m in holdout_rows} == {HOLDOUT}
    # About a fifth held out (binomial(100, 0.2): 8..32 covers it beyond 99.9 %), enough
    # for the two control conversions below.
    assert 8 <= held <= 32, held
    # The simulator got exactly the sent people: not one of the holdout.
    assert sent_to == {m.to for m in treated_rows}
    assert {(m.pricing_category, m.pricing_type) for m in treated_rows} == {
        ("marketing", "regular")
    }
    assert all(m.delivered_at is not None for m in treated_rows)

    treated = [m.to for m in treated_rows]
    control = [m.to for m in holdout_rows]
    before_launch = (campaign.started_at - timedelta(hours=2)).isoformat()
    items: list[dict[str, Any]] = [
        {"phone": treated[0], "event": "purchase", "value": "120.00", "currency": "USD"},
        {"phone": treated[0], "event": "purchase", "value": 30, "currency": "USD"},
        {"phone": treated[1], "event": "purchase", "value": 45.5, "currency": "USD"},
        {"phone": treated[2], "event": "signup"},
        {"phone": treated[3], "event": "purchase", "value": "19.90", "currency": "usd"},
        {"phone": control[0], "event": "purchase", "value": "80.00", "currency": "USD"},
        {"phone": control[1], "event": "signup"},
        {
            "phone": treated[4],
            "event": "purchase",
            "value": "55.00",
            "currency": "USD",
            "occurred_at": before_launch,
        },
    ]
    _, raw_key = api_key_create(
        name="shop", all_numbers=True, requests_per_second=1000, scopes=["campaigns"]
    )
    url = f"{live_server.url}/api/v1/conversions"
    first = post(url, raw_key, items, "spring-orders")
    assert {k: first[k] for k in ("received", "stored", "duplicates", "rejected")} == {
        "received": 8,
        "stored": 8,
        "duplicates": 0,
        "rejected": 0,
    }
    assert (first["attributed"], first["holdout"], first["unmatched"]) == (5, 2, 0)

    message_of = {m.to: m.pk for m in rows}
    expected = [
        (message_of[treated[0]], "delivered"),
        (message_of[treated[0]], "delivered"),
        (message_of[treated[1]], "delivered"),
        (message_of[treated[2]], "delivered"),
        (message_of[treated[3]], "delivered"),
        (message_of[control[0]], "holdout"),
        (message_of[control[1]], "holdout"),
        (None, None),
    ]
    got = [(r["message_id"], r["attributed_by"]) for r in first["results"]]
    assert got == expected
    assert [r["campaign_id"] for r in first["results"]] == [campaign.pk] * 7 + [None]
    assert all(r["contact_matched"] for r in first["results"])

    replay = post(url, raw_key, items, "spring-orders")
    assert (replay["stored"], replay["duplicates"]) == (0, 8)
    assert [r["status"] for r in replay["results"]] == ["duplicate"] * 8
    assert Conversion.objects.count() == 8
    stored = Conversion.objects.get(message_id=message_of[treated[3]])
    assert (stored.value, stored.currency) == (Decimal("19.9000"), "USD")

    # --- the figures, by hand ------------------------------------------------------------
    roi = campaign_roi(campaign)
    revenue = Decimal("120.00") + Decimal("30.00") + Decimal("45.50") + Decimal("19.90")
    assert revenue == Decimal("215.40")
    assert roi.currency == "USD"
    assert roi.conversions == 5
    assert roi.conversions_by_currency == {"USD": 4, "": 1}  # the signup has no value
    assert roi.revenue == revenue
    assert roi.revenue_by_currency == {"USD": revenue}
    assert roi.holdout_conversions == 2
    assert roi.messages_sent == sent
    # 215.40 / S to four places (half-even, as Meta's rates are written).
    assert roi.revenue_per_message == (revenue / sent).quantize(Decimal("0.0001"))
    assert abs(float(roi.revenue_per_message or 0) - 215.40 / sent) <= 0.00005
    assert (roi.cost.charged, roi.cost.unpriced, roi.cost.currency) == (sent, 0, "USD")
    assert roi.cost.cost == PRICE * sent
    assert roi.cost_known
    # 215.40 / (0.0625 S) = 3446.4 / S.
    assert roi.return_on_spend == (Decimal("3446.4") / sent).quantize(Decimal("0.0001"))

    lift = roi.lift
    assert lift is not None and lift.comparison is not None
    assert (lift.treated, lift.treated_converted, lift.control, lift.control_converted) == (
        sent,
        4,
        held,
        2,
    )
    assert lift.treated_rate == pytest.approx(4 / sent)
    assert lift.control_rate == pytest.approx(2 / held)
    comparison = lift.comparison
    assert (comparison.successes_a, comparison.n_a) == (2, held)  # a: the control
    assert (comparison.successes_b, comparison.n_b) == (4, sent)
    assert comparison.difference == pytest.approx(4 / sent - 2 / held)
    low, high = newcombe(4, sent, 2, held)
    assert comparison.interval.low == pytest.approx(low, abs=1e-9)
    assert comparison.interval.high == pytest.approx(high, abs=1e-9)
    assert low < 0 < high and not comparison.significant  # 6 conversions prove nothing
    assert comparison.relative_lift == pytest.approx((4 / sent) / (2 / held) - 1)
    assert lift.window_days == 7
    assert not lift.complete  # launched a moment ago: the window is open
    assert lift.window_closes_at is not None
    assert lift.window_closes_at - timezone.now() > timedelta(days=6)

    # --- the report and the export say the same ------------------------------------------
    client = Client()
    client.force_login(role_user("Marketing"))
    page = client.get(reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    per_message = (revenue / sent).quantize(Decimal("0.0001"))
    assert report_figure(html, "wb-report-roi", "conversions") == "5"
    assert report_figure(html, "wb-report-roi", "revenue") == "215.4000 USD"
    assert report_figure(html, "wb-report-roi", "revenue_per_message") == f"{per_message} USD"
    assert report_figure(html, "wb-report-roi", "cost") == f"{PRICE * sent:.4f} USD"
    return_on_spend = (Decimal("3446.4") / sent).quantize(Decimal("0.01"))
    # The figures, not the words around them (the page's wording is still settling).
    assert report_figure(html, "wb-report-roi", "return_on_spend").startswith(
        f"{return_on_spend}× "
    )
    assert report_figure(html, "wb-report-lift", "treated").startswith(
        f"{round(400 / sent, 1)} % of {sent} "
    )
    assert report_figure(html, "wb-report-lift", "control").startswith(
        f"{round(200 / held, 1)} % of {held} "
    )
    # The difference, then its interval, in signed percentage points.
    shown = re.findall(
        r"[+\u2212\u00b1]\d+\.\d points", report_figure(html, "wb-report-lift", "lift")
    )
    assert shown[:3] == [points(4 / sent - 2 / held), points(low), points(high)], shown

    export = client.get(reverse("admin:campaigns_campaign_export", args=[campaign.pk]))
    assert export.status_code == 200
    by_phone = {r["phone"]: r for r in csv.DictReader(io.StringIO(export.getvalue().decode()))}
    assert len(by_phone) == RECIPIENTS
    columns = ("conversions", "conversion_value", "conversion_currency")
    expected_rows = {
        treated[0]: ("2", "150.0000", "USD"),
        treated[1]: ("1", "45.5000", "USD"),
        treated[2]: ("1", "", ""),  # a signup: no value
        treated[3]: ("1", "19.9000", "USD"),
    }
    for to, row in by_phone.items():
        # Holdout rows and T[4] (converted before the launch) have none of their own.
        assert tuple(row[c] for c in columns) == expected_rows.get(to, ("0", "", "")), to
