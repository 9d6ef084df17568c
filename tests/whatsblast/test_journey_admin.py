"""The journey pages through Django's test client, as Marketing, Support, staff without the
permissions and anonymous users: who may open and do what, the builder refusing a journey
that cannot run with every problem by its path (nothing saved), a live journey's edit
asked first and made a version, the status buttons, test contacts, dry runs, recurring
campaigns, the campaign list's journey steps and the customer page's journeys.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from campaigns.models import Campaign, CampaignKind, CampaignStatus
from journeys.events_in import events_record
from journeys.models import (
    InstanceState,
    Journey,
    JourneyInstance,
    JourneyStatus,
    JourneyStepCampaign,
)
from journeys.routing import events_route
from journeys.sweep import journeys_sweep
from journeys.versions import journey_create, journey_go_live
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.crawl import admin_crawl, world_populate
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT

pytestmark = pytest.mark.django_db

ANA = "+5511987654321"
URL_BUTTON = {
    "index": 0,
    "type": "URL",
    "text": "Back to cart",
    "url": "https://shop.example/{{1}}",
    "sub_type": "url",
    "param": "required",
    "example": "c/1",
}
CART = {
    "entry": {"type": "event", "event": "cart_updated"},
    "key": "cart_id",
    "exits": [{"event": "checkout", "reason": "bought"}],
    "steps": [
        {"id": "wait", "type": "wait", "delay": {"hours": 1}},
        {
            "id": "remind",
            "type": "send",
            "template": "cart_reminder",
            "mapping": {
                "body": {"1": {"field": "name"}},
                "buttons": {"0": {"property": "cart_path"}},
            },
        },
        {"id": "reply", "type": "wait", "for_reply": True, "timeout": {"hours": 24}},
        {"id": "done", "type": "exit", "reason": "reminded"},
    ],
}


def client_for(role: str | None) -> Client:
    client = Client()
    if role is not None:
        client.force_login(role_user(role))
    return client


@pytest.fixture
def number() -> Any:
    number = make_phone_number(display_phone_number="+55 11 4000-1234")
    make_template(account=number.account, name="cart_reminder", buttons=[URL_BUTTON])
    make_contact(phone=ANA, name="Ana Souza", contact_list=make_contact_list(name="Shoppers"))
    return number


@pytest.fixture
def journey(number: Any) -> Journey:
    return journey_create(name="Cart reminder", phone_number=number, definition=CART)


def live(journey: Journey) -> Journey:
    return journey_go_live(journey=journey)


def enter(phone: str = ANA, **properties: str) -> None:
    events_record(
        api_key_id=None,
        items=[{"phone": phone, "name": "cart_updated",
                "properties": {"cart_id": "c1", "cart_path": "c/1", **properties}}],
        idempotency_key=None,
    )  # fmt: skip
    events_route()


def urls(journey: Journey) -> dict[str, tuple[str, str]]:
    """Every journey page and action: (method, url)."""
    pk = journey.pk
    base = "/admin/journeys/journey"
    return {
        "list": ("get", f"{base}/"),
        "add": ("get", f"{base}/add/"),
        "add_recurring": ("get", f"{base}/add-recurring/"),
        "check": ("post", f"{base}/check/"),
        "page": ("get", f"{base}/{pk}/change/"),
        "edit": ("get", f"{base}/{pk}/edit/"),
        "dry_run": ("get", f"{base}/{pk}/dry-run/"),
        "test_contacts": ("post", f"{base}/{pk}/test-contacts/"),
        "go_live": ("post", f"{base}/{pk}/go-live/"),
        "pause": ("post", f"{base}/{pk}/pause/"),
        "resume": ("post", f"{base}/{pk}/resume/"),
        "archive": ("post", f"{base}/{pk}/archive/"),
        "instances": ("get", "/admin/journeys/journeyinstance/"),
    }


def call(client: Client, method: str, url: str, data: dict[str, Any] | None = None) -> Any:
    return getattr(client, method)(url, data or {})


# --- who may ---------------------------------------------------------------------------------


def test_every_journey_url_sends_anonymous_users_to_the_login(journey: Journey) -> None:
    anonymous = Client()
    for name, (method, url) in urls(journey).items():
        response = call(anonymous, method, url)
        assert response.status_code == 302, name
        assert response["Location"].startswith(reverse("admin:login")), name
    assert Journey.objects.get(pk=journey.pk).status == JourneyStatus.DRAFT


def test_staff_without_the_permissions_are_refused_every_journey_url(
    journey: Journey, django_user_model: Any
) -> None:
    staff = django_user_model.objects.create_user("nobody", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    for name, (method, url) in urls(journey).items():
        assert call(client, method, url).status_code == 403, name
    assert Journey.objects.get(pk=journey.pk).status == JourneyStatus.DRAFT


def test_support_reads_journeys_but_builds_and_runs_none(journey: Journey) -> None:
    live(journey)
    support = client_for(SUPPORT)
    pages = urls(journey)
    for name in ("list", "page", "dry_run", "instances"):
        method, url = pages[name]
        assert call(support, method, url).status_code == 200, name
    for name in ("add", "add_recurring", "check", "edit", "test_contacts", "pause", "archive"):
        method, url = pages[name]
        assert call(support, method, url).status_code == 403, name
    page = support.get(pages["page"][1]).content.decode()
    assert 'id="journey-pause"' not in page and 'id="journey-archive"' not in page
    assert 'id="journey-edit"' not in page and 'id="journey-test-add"' not in page
    assert "New journey" not in support.get(pages["list"][1]).content.decode()
    assert Journey.objects.get(pk=journey.pk).status == JourneyStatus.LIVE


def test_marketing_sees_journeys_in_the_sidebar_and_the_list_in_words(journey: Journey) -> None:
    live(journey)
    enter()
    marketer = client_for(MARKETING)
    index = marketer.get("/admin/").content.decode()
    assert "/admin/journeys/journey/" in index
    page = marketer.get("/admin/journeys/journey/").content.decode()
    assert "event cart_updated" in page and "New recurring campaign" in page
    assert '<td class="field-entered">1</td>' in page
    assert '<td class="field-in_it_now">1</td>' in page
    searched = marketer.get("/admin/journeys/journey/", {"q": "nothing like it"}).content.decode()
    assert "Cart reminder" not in searched
    drafts = marketer.get("/admin/journeys/journey/", {"status": "draft"}).content.decode()
    assert "Cart reminder" not in drafts


def test_operators_hold_every_journeys_permission() -> None:
    operator = role_user(OPERATORS)
    for permission in (
        "journeys.add_journey",
        "journeys.change_journey",
        "journeys.run_journey",
        "journeys.view_journeyrun",
        "journeys.view_contactevent",
    ):
        assert operator.has_perm(permission), permission
    marketer = role_user(MARKETING)
    assert marketer.has_perm("journeys.run_journey") and marketer.has_perm("journeys.add_journey")
    assert not marketer.has_perm("journeys.delete_journey")
    support = role_user(SUPPORT)
    assert support.has_perm("journeys.view_journeyhistory")
    assert not support.has_perm("journeys.run_journey")


# --- the builder -----------------------------------------------------------------------------


def post_builder(client: Client, url: str, definition: Any, **fields: Any) -> Any:
    data = {"name": "Cart reminder", "description": "", "definition": json.dumps(definition)}
    data.update(fields)
    return client.post(url, data)


def test_the_builder_saves_a_journey_that_can_run(number: Any) -> None:
    marketer = client_for(MARKETING)
    response = post_builder(
        marketer, "/admin/journeys/journey/add/", CART, phone_number=str(number.pk)
    )
    journey = Journey.objects.get(name="Cart reminder")
    assert response.status_code == 302
    assert response["Location"] == f"/admin/journeys/journey/{journey.pk}/change/"
    assert journey.status == JourneyStatus.DRAFT and journey.phone_number_id == number.pk


def test_the_builder_shows_every_problem_by_its_path_and_saves_nothing(number: Any) -> None:
    journey_create(name="Taken", phone_number=number, definition=CART)
    wrong = json.loads(json.dumps(CART))
    wrong["steps"][1]["template"] = "no_such_template"
    del wrong["steps"][2]["timeout"]
    wrong["window"] = "25:00-21:00"
    marketer = client_for(MARKETING)
    response = post_builder(
        marketer, "/admin/journeys/journey/add/", wrong, phone_number=str(number.pk), name="Taken"
    )
    assert response.status_code == 200
    problems = response.context["problems"]
    # The database's problem (the template is not on the account) with the contract's: all
    # at once, not one kind per attempt.
    assert set(problems) == {"name", "steps[1].template", "steps[2].timeout", "window"}
    page = response.content.decode()
    assert 'id="wb-problems"' in page
    for path in ("steps[1].template", "steps[2].timeout", "window"):
        assert f'<li data-path="{path}">' in page
    # The page's builder gets them too, to mark each row.
    assert '"steps[2].timeout"' in page
    assert Journey.objects.filter(name="Taken").count() == 1
    assert Journey.objects.count() == 1
    # Alone, it is the only problem.
    wrong = json.loads(json.dumps(CART))
    wrong["steps"][1]["template"] = "no_such_template"
    again = post_builder(
        marketer, "/admin/journeys/journey/add/", wrong, phone_number=str(number.pk)
    )
    assert set(again.context["problems"]) == {"steps[1].template"}
    assert "no template &#x27;no_such_template&#x27;" in again.content.decode()
    assert Journey.objects.count() == 1


def test_a_definition_that_is_not_json_is_shown_again_as_typed(number: Any) -> None:
    marketer = client_for(MARKETING)
    response = marketer.post(
        "/admin/journeys/journey/add/",
        {"name": "Broken", "phone_number": str(number.pk), "definition": '{"entry": '},
    )
    assert response.status_code == 200
    assert "definition" in response.context["problems"]
    assert "{&quot;entry&quot;: </textarea>" in response.content.decode()
    assert not Journey.objects.exists()


def test_the_check_answers_the_steps_in_words_or_the_problems(number: Any) -> None:
    marketer = client_for(MARKETING)
    ok = marketer.post(
        "/admin/journeys/journey/check/",
        {"phone_number": str(number.pk), "definition": json.dumps(CART)},
    )
    assert ok.status_code == 200
    assert [s["text"] for s in ok.json()["steps"]][:2] == ["waits 1 h", "sends cart_reminder"]
    wrong = json.loads(json.dumps(CART))
    wrong["steps"][0]["delay"] = {"minutes": 0}
    refused = marketer.post(
        "/admin/journeys/journey/check/",
        {"phone_number": str(number.pk), "definition": json.dumps(wrong)},
    )
    assert refused.status_code == 400
    assert "steps[0].delay" in refused.json()["problems"]
    assert marketer.get("/admin/journeys/journey/check/").status_code == 405


def test_a_draft_is_edited_in_place(journey: Journey) -> None:
    marketer = client_for(MARKETING)
    changed = json.loads(json.dumps(CART))
    changed["steps"][0]["delay"] = {"hours": 2}
    response = post_builder(marketer, f"/admin/journeys/journey/{journey.pk}/edit/", changed)
    assert response.status_code == 302
    journey.refresh_from_db()
    assert journey.version == 1
    assert journey.versions.get().definition["steps"][0]["delay"] == {"hours": 2}


def test_editing_a_live_journey_asks_first_then_makes_a_version_everyone_moves_to(
    journey: Journey,
) -> None:
    live(journey)
    enter()
    marketer = client_for(MARKETING)
    changed = json.loads(json.dumps(CART))
    changed["steps"] = [s for s in changed["steps"] if s["id"] != "wait"]
    url = f"/admin/journeys/journey/{journey.pk}/edit/"
    edit = marketer.get(url).content.decode()
    assert "saving a change makes version 2" in edit

    asked = post_builder(marketer, url, changed, note="no wait")
    assert asked.status_code == 200
    notice = asked.content.decode()
    assert 'id="wb-new-version"' in notice and "Save as version 2?" in notice
    assert "1 at <code>wait</code> leave the journey" in notice
    journey.refresh_from_db()
    assert journey.version == 1

    confirmed = post_builder(marketer, url, changed, note="no wait", confirmed="yes")
    assert confirmed.status_code == 302
    journey.refresh_from_db()
    assert journey.version == 2
    assert journey.versions.get(number=2).note == "no wait"
    instance = JourneyInstance.objects.get(journey=journey)
    assert instance.state == InstanceState.EXITED  # its step was removed
    page = marketer.get(f"/admin/journeys/journey/{journey.pk}/change/").content.decode()
    assert 'data-version="2"' in page and "no wait" in page


def test_renaming_a_live_journey_without_changing_it_makes_no_version(journey: Journey) -> None:
    live(journey)
    marketer = client_for(MARKETING)
    url = f"/admin/journeys/journey/{journey.pk}/edit/"
    response = post_builder(marketer, url, CART, name="Cart reminder (BR)")
    assert response.status_code == 302
    journey.refresh_from_db()
    assert journey.name == "Cart reminder (BR)" and journey.version == 1


# --- the journey's page ------------------------------------------------------------------------


def test_the_status_buttons_follow_the_status(journey: Journey) -> None:
    marketer = client_for(MARKETING)
    page_url = f"/admin/journeys/journey/{journey.pk}/change/"
    page = marketer.get(page_url).content.decode()
    assert 'id="journey-go-live"' in page and 'id="journey-pause"' not in page

    assert marketer.post(f"/admin/journeys/journey/{journey.pk}/go-live/").status_code == 302
    page = marketer.get(page_url).content.decode()
    assert 'id="journey-pause"' in page and 'id="journey-go-live"' not in page
    assert "data-confirm=" in page  # Archive asks first

    marketer.post(f"/admin/journeys/journey/{journey.pk}/pause/")
    journey.refresh_from_db()
    assert journey.status == JourneyStatus.PAUSED and "mia" in journey.status_reason
    assert 'id="journey-resume"' in marketer.get(page_url).content.decode()

    marketer.post(f"/admin/journeys/journey/{journey.pk}/resume/")
    journey.refresh_from_db()
    assert journey.status == JourneyStatus.LIVE

    marketer.post(f"/admin/journeys/journey/{journey.pk}/archive/")
    journey.refresh_from_db()
    assert journey.status == JourneyStatus.ARCHIVED
    page = marketer.get(page_url).content.decode()
    assert 'id="journey-archive"' not in page and 'id="journey-edit"' not in page
    assert marketer.get(f"/admin/journeys/journey/{journey.pk}/edit/").status_code == 403
    # Resuming an archived journey is refused with the reason, not a 500.
    response = marketer.post(f"/admin/journeys/journey/{journey.pk}/resume/", follow=True)
    assert "cannot be resumed" in response.content.decode()
    assert marketer.get(f"/admin/journeys/journey/{journey.pk}/go-live/").status_code == 405


def test_the_page_shows_each_steps_figures(journey: Journey) -> None:
    from datetime import timedelta

    from django.utils import timezone

    live(journey)
    enter()
    t0 = timezone.now()
    journeys_sweep(now=t0)  # the hour's wait starts
    journeys_sweep(now=t0 + timedelta(minutes=61))
    marketer = client_for(MARKETING)
    response = marketer.get(f"/admin/journeys/journey/{journey.pk}/change/")
    rows = {row.step.id: row for row in response.context["steps"]}
    assert rows["remind"].figures.sent == 1
    assert rows["reply"].figures.waiting == 1
    link = JourneyStepCampaign.objects.get(journey=journey, step="remind")
    page = response.content.decode()
    assert f"/admin/campaigns/campaign/{link.campaign_id}/report/" in page
    assert "sent 0 · delivered 0" in page  # queued, not sent yet


def test_test_contacts_are_added_entered_and_their_wait_skipped(journey: Journey) -> None:
    live(journey)
    marketer = client_for(MARKETING)
    url = f"/admin/journeys/journey/{journey.pk}/test-contacts/"
    marketer.post(url, {"action": "add", "phone": "(11) 98765-4321"})
    ana = journey.test_contacts.get()
    assert ana.phone == ANA
    refused = marketer.post(url, {"action": "add", "phone": "+5511900000000"}, follow=True)
    assert "No contact has the number" in refused.content.decode()

    marketer.post(url, {"action": "enter", "contact": ana.pk, "properties": "not json"})
    assert not JourneyInstance.objects.exists()
    marketer.post(url, {"action": "enter", "contact": ana.pk, "properties": '{"cart_id": "t"}'})
    instance = JourneyInstance.objects.get(contact=ana)
    assert instance.test and instance.properties == {"cart_id": "t"}
    journeys_sweep()
    page = marketer.get(f"/admin/journeys/journey/{journey.pk}/change/").content.decode()
    assert "Skip the wait" in page
    marketer.post(url, {"action": "skip", "contact": ana.pk, "instance": instance.pk})
    journeys_sweep()
    instance.refresh_from_db()
    assert instance.step == "reply"

    marketer.post(url, {"action": "remove", "contact": ana.pk})
    assert not journey.test_contacts.exists()
    other = make_contact(phone="+5511955554444")
    response = marketer.post(url, {"action": "enter", "contact": other.pk}, follow=True)
    assert "not one of this journey&#x27;s test contacts" in response.content.decode()


def test_a_dry_run_shows_each_person_their_zone_and_each_steps_time(journey: Journey) -> None:
    marketer = client_for(MARKETING)
    shoppers = make_contact_list(name="Lisbon")
    make_contact(
        phone="+351912345678", name="Bruno", contact_list=shoppers,
        attributes={"timezone": "Europe/Lisbon"},
    )  # fmt: skip
    url = f"/admin/journeys/journey/{journey.pk}/dry-run/"
    response = marketer.get(url, {"sample": "list", "list": shoppers.pk})
    assert response.status_code == 200
    [row] = response.context["people"]
    assert row.person.zone == "Europe/Lisbon"
    assert [s.step for s in row.person.steps][:2] == ["wait", "remind"]
    assert "Europe/Lisbon" in response.content.decode()
    nobody = marketer.get(url, {"sample": "test"})
    assert "nobody to walk through it" in nobody.content.decode().lower()
    bad = marketer.get(url, {"sample": "first", "properties": "[1]"})
    assert "a JSON object" in bad.content.decode()


# --- recurring campaigns ---------------------------------------------------------------------


def test_a_recurring_campaign_is_a_journey_with_a_schedule_and_its_page_shows_next_runs(
    number: Any,
) -> None:
    draft = make_campaign(phone_number=number, name="Weekly deals", status="draft")
    marketer = client_for(MARKETING)
    form = marketer.get("/admin/journeys/journey/add-recurring/").content.decode()
    assert "Weekly deals" in form
    refused = marketer.post(
        "/admin/journeys/journey/add-recurring/",
        {"name": "Weekly", "campaign": draft.pk, "every": "week", "at": "10:00",
         "zone": "America/Sao_Paulo"},
    )  # fmt: skip
    assert refused.status_code == 200 and "Choose the days" in refused.content.decode()
    saved = marketer.post(
        "/admin/journeys/journey/add-recurring/",
        {"name": "Weekly", "campaign": draft.pk, "every": "week", "weekdays": ["mon", "thu"],
         "at": "10:00", "zone": "America/Sao_Paulo", "only_new": "on"},
    )  # fmt: skip
    journey = Journey.objects.get(name="Weekly")
    assert saved.status_code == 302
    entry = journey.versions.get().definition["entry"]
    assert entry == {
        "type": "schedule", "campaign": draft.pk, "every": "week", "weekdays": ["mon", "thu"],
        "at": "10:00", "zone": "America/Sao_Paulo", "only_new": True,
    }  # fmt: skip
    page = marketer.get(f"/admin/journeys/journey/{journey.pk}/change/")
    assert len(page.context["next_runs"]) == 5
    text = page.content.decode()
    assert "every Monday and Thursday 10:00 America/Sao_Paulo" in text
    assert "only to people no earlier run reached" in text
    listed = marketer.get("/admin/journeys/journey/").content.decode()
    assert "once live" in listed and "repeats Weekly deals" in listed
    edit = marketer.get(f"/admin/journeys/journey/{journey.pk}/edit/").content.decode()
    assert 'id="wb-recurring-form"' in edit


# --- campaigns and the customer page ---------------------------------------------------------


def test_the_campaign_list_hides_journey_steps_unless_asked_and_a_step_runs_from_its_journey(
    journey: Journey,
) -> None:
    live(journey)
    own = make_campaign(name="Spring sale", status="completed")
    step = Campaign.objects.get(kind=CampaignKind.JOURNEY_STEP)
    marketer = client_for(MARKETING)
    listed = marketer.get("/admin/campaigns/campaign/").content.decode()
    assert own.name in listed and step.name not in listed
    steps = marketer.get("/admin/campaigns/campaign/", {"kind": "journey_step"}).content.decode()
    assert step.name in steps and own.name not in steps
    assert "step remind of" in steps and f"/admin/journeys/journey/{journey.pk}/change/" in steps

    page = marketer.get(f"/admin/campaigns/campaign/{step.pk}/change/").content.decode()
    assert 'id="wb-journey-origin"' in page and "the step <code>remind</code>" in page
    assert 'data-action="pause"' not in page and 'data-action="cancel"' not in page
    response = marketer.post(f"/admin/campaigns/campaign/{step.pk}/pause/", follow=True)
    assert "is a journey&#x27;s step" in response.content.decode()
    step.refresh_from_db()
    assert step.status == CampaignStatus.RUNNING


def test_the_customer_page_lists_their_journeys_where_they_are_and_why(journey: Journey) -> None:
    live(journey)
    enter()
    events_record(
        api_key_id=None,
        items=[{"phone": ANA, "name": "checkout", "properties": {"cart_id": "c1"}}],
        idempotency_key=None,
    )
    events_route()
    enter(cart_id="c2")
    for role in (MARKETING, SUPPORT):
        response = client_for(role).get(f"/admin/customer/{ANA}/")
        rows = response.context["journeys"]
        assert [r["where"] for r in rows] == ["at wait", "left: bought (event checkout)"], role
        page = response.content.decode()
        assert 'id="customer-journeys"' in page
        assert f'href="/admin/journeys/journey/{journey.pk}/change/"' in page
        assert "Entered" in page and "Left" in page


def test_the_crawl_reaches_every_journey_page_for_each_role() -> None:
    world = world_populate(token="t0ken")
    for role in (MARKETING, SUPPORT):
        client = Client()
        client.force_login(role_user(role))
        pages = admin_crawl(client)
        errors = {url: page.status for url, page in pages.items() if page.status >= 500}
        assert errors == {}, role
        reached = set(pages)
        journey, recurring = world.ids["journey"], world.ids["recurring"]
        assert f"/admin/journeys/journey/{journey}/change/" in reached, role
        assert f"/admin/journeys/journey/{recurring}/change/" in reached, role
        assert any(u.startswith(f"/admin/journeys/journey/{journey}/dry-run/") for u in reached)
        if role == MARKETING:
            assert f"/admin/journeys/journey/{journey}/edit/" in reached
            assert "/admin/journeys/journey/add/" in reached
        client.logout()
