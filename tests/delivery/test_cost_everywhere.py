"""A campaign's cost, written one way on every page, from Meta's own rate-card file.

The estimate counts the rows the launch will send (not those it skips); the report, the
campaign list, the live page and the export show the cost; with no rate card loaded they
say so instead of 0.00; ``manage.py ratecard load`` reads Meta's published file layout.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from campaigns.models import Campaign, CampaignStatus, RateCard
from delivery.campaigns.exports import campaign_results_rows
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.campaigns.pricing import (
    CHARGED_LABEL,
    NO_RATE_CARD,
    campaign_cost_estimate,
    campaign_costs,
    campaigns_costs_known,
    money_text,
)
from delivery.campaigns.rate_cards import (
    SAMPLE_RATE_CARD,
    market_prefixes,
    rate_card_load,
    region_prefixes,
)
from delivery.models import Message, MessageStatus
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING
from whatsblast.jobs import campaign_costs_refresh_job
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db

HEADER = "Market,Currency,Marketing,Utility,Authentication,Authentication-International,Service\n"


def card_file(tmp_path: Path, body: str, *, preamble: str = "") -> Path:
    path = tmp_path / "rates.csv"
    path.write_text(preamble + HEADER + body, encoding="utf-8")
    return path


def marketing_campaign(phones: list[str], **contact_fields: Any) -> Campaign:
    number = make_phone_number()
    contact_list = make_contact_list()
    for phone in phones:
        fields = {"name": "Ana", **contact_fields.get(phone, {})}
        make_contact(phone=phone, contact_list=contact_list, **fields)
    template = make_template(account=number.account, category="MARKETING")
    return make_campaign(phone_number=number, template=template, lists=[contact_list])


def delivered(campaign: Campaign, to: str, kind: str = "regular") -> None:
    Message.objects.create(
        campaign=campaign,
        phone_number=campaign.phone_number,
        to=to,
        status=MessageStatus.DELIVERED,
        pricing_model="PMP",
        pricing_type=kind,
        pricing_category="marketing",
        next_attempt_at="2026-01-01T00:00:00Z",
    )


# --- Meta's file -------------------------------------------------------------------------


def test_the_sample_of_metas_card_loads_into_calling_code_prefixes() -> None:
    loaded = rate_card_load(SAMPLE_RATE_CARD)

    assert (loaded.markets, loaded.currency, loaded.authentication_international) == (
        10,
        "USD",
        1,
    )
    rates = {
        (r.country_prefix, r.category): r.price for r in RateCard.objects.filter(currency="USD")
    }
    assert rates[("+55", "marketing")] == Decimal("0.0625")  # Brazil
    assert rates[("+1", "utility")] == Decimal("0.004")  # North America: the US and Canada
    assert rates[("+1876", "marketing")] == Decimal("0.074")  # Jamaica: Rest of Latin America
    assert rates[("+43", "marketing")] == Decimal("0.0592")  # Austria: Rest of Western Europe
    assert rates[("*", "marketing")] == Decimal("0.0604")  # Other
    assert ("+55", "service") not in rates  # a blank cell is no rate, not a free one


def test_a_country_on_its_own_row_is_never_priced_with_its_group() -> None:
    both = market_prefixes(["Morocco", "Rest of Africa", "Other"])
    assert both["+212"] == "Morocco" and both["+213"] == "Rest of Africa"
    assert market_prefixes(["Rest of Africa"])["+212"] == "Rest of Africa"
    assert region_prefixes("DO") == ["+18001", "+1809", "+1829", "+1849"]
    assert region_prefixes("BR") == ["+55"]


def test_the_command_reads_an_xlsx_with_a_title_above_and_prices_as_typed(
    tmp_path: Path,
) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["WhatsApp Business Platform rate card"])
    sheet.append(["Effective 2026-10-01"])
    sheet.append(["Market", "Currency", "Marketing", "Utility", "Authentication", "Service"])
    sheet.append(["Brazil", "BRL", "R$ 0,3125", "0,04", "n/a", "Free"])
    sheet.append(["Türkiye", "BRL", 0.05, 0.01, 0.01, None])
    path = tmp_path / "rates.xlsx"
    book.save(path)
    out = io.StringIO()

    call_command("ratecard", "load", str(path), stdout=out)

    assert "Loaded 5 rates for 2 markets (2 calling-code prefixes) in BRL." in out.getvalue()
    brazil = RateCard.objects.get(country_prefix="+55", category="marketing")
    assert (brazil.price, brazil.currency) == (Decimal("0.3125"), "BRL")
    assert RateCard.objects.get(country_prefix="+90", category="utility").price == Decimal("0.01")
    out = io.StringIO()
    call_command("ratecard", "show", stdout=out)
    assert "+55      marketing       0.3125 BRL" in out.getvalue()


@pytest.mark.parametrize(
    ("body", "preamble", "message"),
    [
        ("", "", "a header but no market below it"),
        ("Brazil,USD,0.0625,0.008,0.0315,,\nAtlantis,USD,0.1,,,,\n", "", "line 3: unknown market"),
        ("Brazil,USD,cheap,0.008,0.0315,,\n", "", "line 2, column 'Marketing': 'cheap' is not"),
        ("Brazil,USD,-0.01,,,,\n", "", "a negative price"),
        ("Brazil,USD,0.06,,,,\nBrazil,USD,0.07,,,,\n", "", "line 3: Brazil is on the card twice"),
        ("Brazil,USD,0.06,,,,\nIndia,EUR,0.01,,,,\n", "", "mixes currencies (EUR, USD)"),
        ("Brazil,dollars,0.06,,,,\n", "", "'dollars' is not a currency code"),
        ("Brazil,USD,0.0612345,,,,\n", "Rates\n", "more than five decimals"),
    ],
)
def test_a_malformed_card_is_refused_with_the_line_and_changes_nothing(
    tmp_path: Path, body: str, preamble: str, message: str
) -> None:
    RateCard.objects.create(country_prefix="+55", category="marketing", price=Decimal("0.05"))
    path = card_file(tmp_path, body, preamble=preamble)

    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("ratecard", "load", str(path))

    assert list(RateCard.objects.values_list("country_prefix", "price")) == [
        ("+55", Decimal("0.05000"))
    ]


def test_a_file_that_is_not_a_rate_card_says_what_it_lacks(tmp_path: Path) -> None:
    contacts = tmp_path / "contacts.csv"
    contacts.write_text("name,phone\nAna,+5511999990001\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no header row with a 'Market' column"):
        call_command("ratecard", "load", str(contacts))
    no_currency = tmp_path / "no-currency.csv"
    no_currency.write_text("Market,Marketing\nBrazil,0.0625\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no Currency column"):
        call_command("ratecard", "load", str(no_currency))
    call_command("ratecard", "load", str(no_currency), "--currency", "usd")
    assert RateCard.objects.get().currency == "USD"


# --- the estimate --------------------------------------------------------------------------


def test_the_estimate_counts_exactly_the_rows_the_launch_creates_as_pending() -> None:
    rate_card_load(SAMPLE_RATE_CARD)
    opted_out = {"opted_out_at": datetime(2026, 1, 1, tzinfo=UTC)}
    phones = [
        "+5511999990001",
        "+5511999990002",
        "+5511999990003",  # opted out: skipped
        "+12125550100",  # a US number, marketing: skipped
        "+14165550100",  # Canada: sent
        "+18765550100",  # Jamaica: sent
    ]
    campaign = marketing_campaign(phones, **{"+5511999990003": opted_out})

    estimate = campaign_cost_estimate(campaign=campaign)
    campaign_start(campaign=campaign)

    pending = Message.objects.filter(campaign=campaign, status=MessageStatus.PENDING).count()
    assert estimate.messages == pending == 4
    assert Message.objects.filter(campaign=campaign, status=MessageStatus.SKIPPED).count() == 2
    # Two Brazilians at 0.0625, Canada at 0.0250, Jamaica at 0.0740.
    assert estimate.cost == Decimal("0.2240") and estimate.text == "0.2240 USD"
    assert campaign_cost_estimate(campaign=campaign).messages == pending  # once launched


def test_with_no_rate_card_the_estimate_says_so_rather_than_zero() -> None:
    campaign = marketing_campaign(["+5511999990001"])

    report = campaign_preflight(campaign=campaign)

    assert report.cost is not None and report.cost.text == NO_RATE_CARD
    assert report.as_dict()["cost"]["text"] == NO_RATE_CARD
    assert not any("price on the rate card" in f.text for f in report.findings)


# --- the pages and the export ---------------------------------------------------------------


def test_report_list_live_page_and_export_show_the_same_cost() -> None:
    rate_card_load(SAMPLE_RATE_CARD)
    campaign = marketing_campaign([])
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.COMPLETED)
    for i in range(1, 1_001):  # thousands separators
        delivered(campaign, f"+55119{i:08d}")
    delivered(campaign, "+14165550100")
    delivered(campaign, "+5511999990999", kind="free_entry_point")
    expected = money_text(Decimal("0.0625") * 1000 + Decimal("0.025"), "USD")
    assert expected == "62.5250 USD"
    page = Client()
    page.force_login(role_user(MARKETING))

    report = page.get(reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
    html = report.content.decode()
    assert f"<strong>{expected}</strong> for 1,001 charged messages" in html
    assert f'<th class="wb-num">{CHARGED_LABEL}</th>' in html
    assert "Conversations" not in html and "Billable" not in html

    listing = page.get(reverse("admin:campaigns_campaign_changelist")).content.decode()
    assert f'<span class="wb-cost" title="{expected}">62.5250</span>' in listing

    live = page.get(reverse("admin:campaigns_campaign_live", args=[campaign.pk])).json()
    assert live["cost"]["text"] == expected and live["charged_label"] == CHARGED_LABEL
    assert "billing" not in live

    rows = list(campaign_results_rows(campaign=campaign))
    header = rows[0]
    # A phone starts with +: the export writes it as text for a spreadsheet ('+55...).
    by_phone = {row[header.index("phone")].lstrip("'"): row for row in rows[1:]}
    cost, currency = header.index("cost"), header.index("currency")
    assert (by_phone["+5511900000001"][cost], by_phone["+5511900000001"][currency]) == (
        "0.0625",
        "USD",
    )
    assert by_phone["+14165550100"][cost] == "0.0250"
    assert by_phone["+5511999990999"][cost] == "0.0000"  # Meta did not charge it
    total = sum((Decimal(row[cost]) for row in rows[1:]), Decimal(0))
    assert money_text(total, "USD") == expected


def test_the_list_reads_the_cost_without_the_messages_and_says_when_there_is_no_card() -> None:
    campaign = marketing_campaign([])
    page = Client()
    page.force_login(role_user(MARKETING))

    listing = page.get(reverse("admin:campaigns_campaign_changelist")).content.decode()
    assert NO_RATE_CARD in listing and "0.00" not in listing

    rate_card_load(SAMPLE_RATE_CARD)
    never_reckoned = campaigns_costs_known(campaign_ids=[campaign.pk], card_currency="USD")
    assert never_reckoned == {}
    delivered(campaign, "+5511999990001")
    campaign_costs(campaign=campaign)  # as the live page and the report do
    known = campaigns_costs_known(campaign_ids=[campaign.pk], card_currency="USD")[campaign.pk]
    assert (known.charged, known.text) == (1, "0.0625 USD")


def test_the_tick_keeps_the_lists_cost_current_for_campaigns_no_one_opened() -> None:
    rate_card_load(SAMPLE_RATE_CARD)
    recent = marketing_campaign(["+5511999990001"])
    campaign_start(campaign=recent)
    delivered(recent, "+5511999990002")
    long_done = marketing_campaign(["+5511999990003"])
    campaign_start(campaign=long_done)
    delivered(long_done, "+5511999990004")
    Campaign.objects.filter(pk=long_done.pk).update(
        status=CampaignStatus.COMPLETED, completed_at=datetime(2026, 1, 1, tzinfo=UTC)
    )

    assert maintenance_tick()["campaign_costs_refresh_queued"] is True
    assert maintenance_tick()["campaign_costs_refresh_queued"] is False  # once a minute
    assert campaign_costs_refresh_job() == [recent.pk]  # the queued job's work

    known = campaigns_costs_known(campaign_ids=[recent.pk, long_done.pk], card_currency="USD")
    assert list(known) == [recent.pk]  # a campaign finished long ago is not read again
    assert (known[recent.pk].charged, known[recent.pk].text) == (1, "0.0625 USD")


def test_the_export_leaves_the_cost_empty_until_meta_reports_pricing() -> None:
    rate_card_load(SAMPLE_RATE_CARD)
    campaign = marketing_campaign(["+5511999990001"])
    campaign_start(campaign=campaign)

    rows = list(campaign_results_rows(campaign=campaign))
    line = dict(zip(rows[0], rows[1], strict=True))
    assert (line["cost"], line["currency"], line["pricing_type"]) == ("", "", "")
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)  # plain CSV cells
