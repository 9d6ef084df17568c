"""Must show: a tracked-link campaign end to end, over real HTTP on both sides.

Forty people get a template whose URL button was approved as ``CLICK_BASE_URL/{{1}}`` and
whose body's second parameter is a link too, both mapped to ``{"click": true}``. The
simulator stands in for Meta (the sends, then signed delivery callbacks posted to the live
server); the recipients then tap their links on the live server with ``requests``:

- people 0-9 once, 10-14 twice (a person's browser);
- 15-19 only through a link-preview fetcher (WhatsApp's own, Meta's facebookexternalhit);
- 20 through a preview first, then once in a browser (they clicked);
- 21-39 never.

By hand: total = 10 + 2 * 5 + 1 = 21 people's taps, unique = 10 + 5 + 1 = 16 messages,
previews = 5 + 1 = 6; "delivered but did not click" = 40 - 16 = 24 (the five preview-only
among them: a machine fetching the card is not the person opening it). The campaign's
report and its export show the same counts; the follow-up to "delivered but did not click",
launched as created, reaches exactly those 24, each with a token of their new message.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from campaigns.catalogue.components import components_parse
from campaigns.models import (
    CampaignStatus,
    Contact,
    ContactList,
    ListMembership,
    Template,
)
from delivery.campaigns.follow_ups import campaign_follow_up
from delivery.campaigns.launch import campaign_start
from delivery.engagement.clicks import ClickCounts, campaign_clicks, committer_stop
from delivery.models import Click, Message
from tests.engine_support import number_on, report_figure, settle, simulator_calling
from tests.factories import make_campaign, make_contact_list, make_message, make_phone_number
from tests.ui.support import role_user
from tests.webhooks.support import APP_SECRET
from whatsblast.core.click_tokens import click_token

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 40
FALLBACK = "https://fallback.example.org/"
DESTINATION = "https://shop.example.com/sale/{{city}}?who={{name}}"
CAMPAIGN_NAME = "Spring Sale 2026"
# Each city as it must appear in the redirect's path (UTF-8, percent-encoded, %20 for
# the space): written out by hand, not by the product's own quoting.
CITIES = [("São Paulo", "S%C3%A3o%20Paulo"), ("Rio", "Rio"), ("Belo Horizonte", "Belo%20Horizonte")]
UTM = "utm_source=whatsapp&utm_medium=message&utm_campaign=spring-sale-2026"

BROWSER = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Mobile Safari/537.36"
)
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
)
WHATSAPP_FETCHER = "WhatsApp/2.24.12.78 A"
FACEBOOK_FETCHER = "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"

ONCE = range(0, 10)
TWICE = range(10, 15)
PREVIEW_ONLY = range(15, 20)
PREVIEW_THEN_CLICK = 20
CLICKED = [*ONCE, *TWICE, PREVIEW_THEN_CLICK]


def phone(i: int) -> str:
    return f"+55119{7000_0000 + i:08d}"


def expected_destination(i: int) -> str:
    return f"https://shop.example.com/sale/{CITIES[i % 3][1]}?who=Cliente{i:02d}&{UTM}"


def components(base: str) -> list[dict[str, Any]]:
    """The template as Meta approved it: a body with the name and a link, a URL button
    whose suffix is the token (its URL exactly CLICK_BASE_URL/{{1}})."""
    return [
        {
            "type": "BODY",
            "text": "Hi {{1}}, the spring sale is on: {{2}}",
            "example": {"body_text": [["Ana", f"{base}/abc123"]]},
        },
        {
            "type": "BUTTONS",
            "buttons": [
                {
                    "type": "URL",
                    "text": "Shop now",
                    "url": base + "/{{1}}",
                    "example": [f"{base}/abc123"],
                }
            ],
        },
    ]


def tracked_template(sim: Any | None, number: Any, base: str) -> Template:
    approved = components(base)
    parsed = components_parse(approved)
    template = Template.objects.create(
        account=number.account,
        name="spring_sale",
        language="pt_BR",
        category="MARKETING",
        components=approved,
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_examples=parsed.body_examples,
        buttons=parsed.buttons,
    )
    if sim is not None:
        sim.add_template(
            name="spring_sale",
            language="pt_BR",
            components=approved,
            category="MARKETING",
            waba_id=number.account.waba_id,
        )
    return template


def audience() -> ContactList:
    contact_list = make_contact_list(name="spring")
    contacts = Contact.objects.bulk_create(
        Contact(phone=phone(i), name=f"Cliente{i:02d}", attributes={"city": CITIES[i % 3][0]})
        for i in range(RECIPIENTS)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    return contact_list


def template_bodies(sim: Any, *, after: int = 0) -> dict[str, dict[str, Any]]:
    """Each template send after ``after`` by recipient (E.164), failing on a second one."""
    bodies: dict[str, dict[str, Any]] = {}
    for record in sim.records(after=after, bodies=True):
        body = json.loads(record["body"]) if record.get("body") else {}
        if body.get("type") != "template":
            continue
        to = "+" + str(body["to"]).lstrip("+")
        assert to not in bodies, f"{to} was sent twice"
        bodies[to] = body
    return bodies


def links_of(body: dict[str, Any]) -> tuple[str, str]:
    """(the button's suffix, the body's second parameter) of one send."""
    parts = {c["type"]: c for c in body["template"]["components"]}
    assert parts["button"]["sub_type"] == "url" and parts["button"]["index"] == "0"
    suffix = parts["button"]["parameters"][0]["text"]
    texts = [p["text"] for p in parts["body"]["parameters"]]
    assert len(texts) == 2
    return suffix, texts[1]


def tap(session: requests.Session, url: str, agent: str) -> str:
    answer = session.get(url, headers={"User-Agent": agent}, allow_redirects=False, timeout=30)
    assert answer.status_code == 302, (url, answer.status_code, answer.text[:200])
    assert answer.headers["Cache-Control"] == "no-store"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    return answer.headers["Location"]


@pytest.fixture(autouse=True)
def fresh_committer() -> Iterator[None]:
    """The click committer is the process's: built for this test's settings, and its
    threads (and their connections) gone before the database is flushed."""
    committer_stop()
    yield
    committer_stop()


@override_settings(
    CAMPAIGN_JOB_BUDGET_SECONDS=1.0, CLICK_FALLBACK_URL=FALLBACK, WHATSAPP_APP_SECRET=APP_SECRET
)
def test_tracked_links_count_people_apart_from_previews_and_follow_up_the_rest(
    live_server: Any,
) -> None:
    base = f"{live_server.url}/c"
    assert reverse("click", args=["tok"]) == "/c/tok"  # the route CLICK_BASE_URL points at
    with (
        override_settings(CLICK_BASE_URL=base),
        simulator_calling(live_server, APP_SECRET, read_fraction=0.5, seed=11) as sim,
    ):
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = make_campaign(
            name=CAMPAIGN_NAME,
            phone_number=number,
            template=tracked_template(sim, number, base),
            lists=[audience()],
            param_mapping={
                "body": {"1": {"field": "name"}, "2": {"click": True}},
                "buttons": {"0": {"click": True}},
            },
            link_destination=DESTINATION,
            link_utm=True,
        )
        campaign_start(campaign=campaign)
        settle(sim)
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED

        # --- every recipient got their own token, in the button and in the body --------
        messages = {m.to: m for m in Message.objects.filter(campaign=campaign)}
        assert len(messages) == RECIPIENTS
        assert {m.status for m in messages.values()} <= {"delivered", "read"}
        assert {m.status for m in messages.values()} == {"delivered", "read"}  # both kinds
        bodies = template_bodies(sim)
        assert set(bodies) == {phone(i) for i in range(RECIPIENTS)}
        tokens: dict[int, str] = {}
        for i in range(RECIPIENTS):
            suffix, body_link = links_of(bodies[phone(i)])
            assert suffix == click_token(messages[phone(i)].id)  # this person's message
            assert body_link == f"{base}/{suffix}"
            assert "{{" not in suffix and "{{" not in body_link  # no marker left
            tokens[i] = suffix
        assert len(set(tokens.values())) == RECIPIENTS

        # --- the recipients tap, over real HTTP ------------------------------------------
        session = requests.Session()
        for i in range(RECIPIENTS):
            url = f"{base}/{tokens[i]}"
            visits: list[str] = []
            if i in ONCE:
                visits = [BROWSER]
            elif i in TWICE:
                visits = [BROWSER, IPHONE]
            elif i in PREVIEW_ONLY:
                visits = [WHATSAPP_FETCHER if i % 2 else FACEBOOK_FETCHER]
            elif i == PREVIEW_THEN_CLICK:
                visits = [WHATSAPP_FETCHER, BROWSER]
            for agent in visits:
                assert tap(session, url, agent) == expected_destination(i), (i, agent)
        # A token of a message that does not exist (a good MAC), and one made up.
        missing = click_token(max(m.id for m in messages.values()) + 10_000)
        assert tap(session, f"{base}/{missing}", BROWSER) == FALLBACK
        assert tap(session, f"{base}/{tokens[0][:-1]}x", BROWSER) == FALLBACK

        # Each answer came after its click was committed: the rows are all there now.
        assert campaign_clicks(campaign.pk) == ClickCounts(total=21, unique=16, previews=6)
        # Each stored for the message (and contact) its token names, the taps per person.
        people = Click.objects.filter(campaign=campaign, is_preview=False)
        assert Counter(people.values_list("contact__phone", flat=True)) == {
            **{phone(i): 1 for i in ONCE},
            **{phone(i): 2 for i in TWICE},
            phone(PREVIEW_THEN_CLICK): 1,
        }
        assert set(people.values_list("contact__phone", "message_id")) == {
            (phone(i), messages[phone(i)].id) for i in CLICKED
        }
        previews = Click.objects.filter(campaign=campaign, is_preview=True)
        assert Counter(previews.values_list("contact__phone", flat=True)) == {
            phone(i): 1 for i in [*PREVIEW_ONLY, PREVIEW_THEN_CLICK]
        }
        assert Click.objects.count() == 27  # nothing stored for the two fallbacks

        # --- the follow-up: delivered, no person's click --------------------------------
        not_clicked = {phone(i) for i in range(RECIPIENTS) if i not in CLICKED}
        assert len(not_clicked) == 24
        draft = campaign_follow_up(campaign=campaign, key="delivered_not_clicked")
        assert draft.status == CampaignStatus.DRAFT
        assert draft.param_mapping == campaign.param_mapping  # the tracked links too
        assert (draft.link_destination, draft.link_utm) == (DESTINATION, True)
        before = max((r["seq"] for r in sim.records()), default=0)
        campaign_start(campaign=draft)
        settle(sim)
        draft.refresh_from_db()
        assert draft.status == CampaignStatus.COMPLETED
        followed = template_bodies(sim, after=before)
        assert set(followed) == not_clicked
        assert set(Message.objects.filter(campaign=draft).values_list("to", flat=True)) == (
            not_clicked
        )
        # Their links are the follow-up's own messages', not the first campaign's.
        draft_messages = {m.to: m for m in Message.objects.filter(campaign=draft)}
        for to, body in followed.items():
            suffix, _ = links_of(body)
            assert suffix == click_token(draft_messages[to].id)

        # --- the first campaign's report and export -------------------------------------
        client = Client()
        client.force_login(role_user("Marketing"))
        page = client.get(reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
        assert page.status_code == 200
        html = page.content.decode()
        assert report_figure(html, "wb-report-clicks", "clicks") == "21"
        assert report_figure(html, "wb-report-clicks", "people") == "16"
        assert report_figure(html, "wb-report-clicks", "previews") == "6"
        # People who clicked of those delivered (read included): 16 / 40 = 40.0 %.
        assert report_figure(html, "wb-report-clicks", "click_rate") == "40.0 %"

        export = client.get(reverse("admin:campaigns_campaign_export", args=[campaign.pk]))
        assert export.status_code == 200
        rows = {r["phone"]: r for r in csv.DictReader(io.StringIO(export.getvalue().decode()))}
        assert set(rows) == {phone(i) for i in range(RECIPIENTS)}
        taps = {i: 1 for i in ONCE} | {i: 2 for i in TWICE} | {PREVIEW_THEN_CLICK: 1}
        for i in range(RECIPIENTS):
            row = rows[phone(i)]
            assert row["clicks"] == str(taps.get(i, 0)), (i, row["clicks"])  # previews: 0
            assert (row["conversions"], row["conversion_value"]) == ("0", "")


@override_settings(CLICK_BASE_URL="https://go.example.com/c")
def test_a_tracked_campaigns_follow_up_keeps_its_destination() -> None:
    """A follow-up starts from the campaign's template and mapping, tracked links
    included, so it starts from where those links go too: as created, it launches (to
    the two delivered who did not click, none held out).

    (It once copied ``param_mapping`` with its ``{"click": true}`` slots but not
    ``link_destination``, and its launch was refused: "a tracked link needs a destination".)
    """
    number = make_phone_number()
    campaign = make_campaign(
        name=CAMPAIGN_NAME,
        phone_number=number,
        template=tracked_template(None, number, "https://go.example.com/c"),
        lists=[audience()],
        param_mapping={
            "body": {"1": {"field": "name"}, "2": {"click": True}},
            "buttons": {"0": {"click": True}},
        },
        link_destination=DESTINATION,
        link_utm=False,
        attribution_days=14,
        holdout_percent=20,
        status=CampaignStatus.COMPLETED,
        started_at=timezone.now(),
    )
    for i in range(3):
        contact = Contact.objects.get(phone=phone(i))
        message = make_message(
            campaign=campaign, contact=contact, to=contact.phone, status="delivered"
        )
        if i == 0:
            Click.objects.create(
                message=message, campaign=campaign, contact=contact, clicked_at=timezone.now()
            )
    draft = campaign_follow_up(campaign=campaign, key="delivered_not_clicked")
    campaign_start(campaign=draft)  # not refused
    draft.refresh_from_db()
    assert (draft.link_destination, draft.link_utm) == (DESTINATION, False)
    # Conversions count over the same window; the holdout was the original's experiment.
    assert (draft.attribution_days, draft.holdout_percent) == (14, 0.0)
    assert set(Message.objects.filter(campaign=draft).values_list("to", flat=True)) == {
        phone(1),
        phone(2),
    }
