"""The campaigns API, operation by operation: what each answers, who may call it, and every
status its description documents provoked at least once (the set seen equals the set
documented). Every response is checked against the OpenAPI document (``response_check``).

Keys: ``writer`` (campaigns scope, the number), ``reader`` (read scope, the number),
``sender`` (send scope only), ``stranger`` (campaigns scope, another number).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from campaigns.models import (
    Campaign,
    CampaignStatus,
    ContactList,
    PhoneNumber,
    Segment,
    Template,
    TemplateStatus,
)
from delivery.api.keys import api_key_create
from delivery.models import ApiCreated, Message, MessageStatus
from tests.api.support import DOCUMENT, response_check
from tests.api.test_fuzz import encoded, json_values, junk_text
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_message,
    make_phone_number,
    make_template,
)

pytestmark = pytest.mark.django_db


@dataclass
class Caller:
    """Calls /api/v1 with a key; every answer checked against the document."""

    key: str
    client: Client = field(default_factory=Client)

    def __call__(
        self,
        method: str,
        path: str,
        *,
        id: Any = None,
        body: Any = None,
        raw: bytes | None = None,
        key: str | None = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        query: str = "",
        check_as: str | None = None,
    ) -> tuple[HttpResponse, Any]:
        headers = dict(headers or {})
        key = self.key if key is None else key
        if key:
            headers.setdefault("Authorization", f"Bearer {key}")
        url = "/api/v1" + path.format(id=id) + (f"?{query}" if query else "")
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        response = self.client.generic(
            method.upper(), url, data=data, content_type=content_type, headers=headers
        )
        return response, response_check(path, check_as or method, response)


@dataclass
class World:
    number: PhoneNumber
    other_number: PhoneNumber
    template: Template
    vip: ContactList
    writer: Caller
    reader: Caller
    sender: Caller
    stranger: Caller

    def body(self, **changes: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": "Spring sale",
            "phone_number_id": self.number.phone_number_id,
            "template": {"name": "promo", "language": "en_US"},
            "mapping": {"body": {"1": {"field": "name"}}},
            "audience": {"lists": ["vip"]},
        }
        body.update(changes)
        return body


def _key(numbers: Iterable[PhoneNumber], scopes: list[str], **extra: Any) -> str:
    _, raw = api_key_create(
        name="k",
        phone_number_ids=[n.phone_number_id for n in numbers],
        scopes=scopes,
        requests_per_second=extra.pop("requests_per_second", 10_000),
        **extra,
    )
    return raw


@pytest.fixture
def world(db: Any) -> World:
    number = make_phone_number(rate_per_second=80)
    other = make_phone_number(rate_per_second=80)
    template = make_template(account=number.account, name="promo", body_text="Hi {{1}}")
    vip = make_contact_list(name="vip")
    for i in range(3):
        make_contact(phone=f"+55119876500{i:02d}", name=f"Ana {i}", contact_list=vip)
    return World(
        number=number,
        other_number=other,
        template=template,
        vip=vip,
        writer=Caller(_key([number], ["campaigns"])),
        reader=Caller(_key([number], ["read"])),
        sender=Caller(_key([number], ["send"])),
        stranger=Caller(_key([other], ["campaigns"])),
    )


def _create(world: World, **changes: Any) -> dict[str, Any]:
    response, body = world.writer("post", "/campaigns", body=world.body(**changes))
    assert response.status_code == 201, body
    return dict(body)


def _tight(world: World) -> Caller:
    """A key allowed one request a second: its second request is a 429."""
    return Caller(_key([world.number], ["campaigns", "read"], requests_per_second=1))


def _statuses(operation: dict[str, Any]) -> set[int]:
    return {int(code) for code in operation["responses"]}


def _documented(path: str, method: str) -> set[int]:
    return _statuses(DOCUMENT["paths"][path][method])


# --- POST /campaigns ---------------------------------------------------------------------------


def test_create_makes_a_draft_with_its_audience_and_mapping(world: World) -> None:
    segment = Segment.objects.create(name="staff", rules={"list": "vip"})
    make_contact_list(name="blocked")
    response, body = world.writer(
        "post",
        "/campaigns",
        body=world.body(
            audience={
                "lists": ["vip"],
                "exclude_lists": ["blocked"],
                "exclude_segments": ["staff"],
            },
            frequency_cap="1/3d",
            frequency_cap_defer=True,
            send_window={"start": "09:00", "end": "20:00", "time_zone": "america/sao_paulo"},
            link={"destination": "https://shop.example.com/{{name}}", "utm": False},
            holdout_percent=10,
            attribution_days=3,
        ),
    )
    assert response.status_code == 201
    campaign = Campaign.objects.get(pk=body["id"])
    assert response["Location"] == f"http://testserver/api/v1/campaigns/{campaign.pk}"
    assert body["url"] == response["Location"]
    assert (campaign.status, campaign.name) == (CampaignStatus.DRAFT, "Spring sale")
    assert campaign.template == world.template
    assert campaign.param_mapping == {"body": {"1": {"field": "name"}}}
    assert list(campaign.lists.all()) == [world.vip]
    assert list(campaign.exclude_segments.all()) == [segment]
    assert campaign.exclude_lists.get().name == "blocked"
    assert (campaign.frequency_cap, campaign.frequency_cap_defer) == ("1/3d", True)
    assert (f"{campaign.window_start:%H:%M}", f"{campaign.window_end:%H:%M}") == ("09:00", "20:00")
    assert campaign.time_zone == "America/Sao_Paulo"
    assert (campaign.link_destination, campaign.link_utm) == (
        "https://shop.example.com/{{name}}",
        False,
    )
    assert (campaign.holdout_percent, campaign.attribution_days) == (10.0, 3)
    assert body["status"] == "draft"
    assert body["audience"] == {
        "lists": ["vip"],
        "segments": [],
        "exclude_lists": ["blocked"],
        "exclude_segments": ["staff"],
    }
    assert body["send_window"]["time_zone"] == "America/Sao_Paulo"
    assert body["counts"] == dict.fromkeys(MessageStatus.values, 0)
    assert body["progress"] == {"total": 0, "done": 0, "remaining": 0, "percent": 0.0}


def test_create_in_many_languages_holds_the_fallback(world: World) -> None:
    make_template(account=world.number.account, name="promo", language="pt_BR")
    body = _create(
        world,
        template={"name": "promo", "languages": {"field": "lang", "fallback": "pt_BR"}},
    )
    campaign = Campaign.objects.get(pk=body["id"])
    assert campaign.languages and campaign.template.language == "pt_BR"
    assert (campaign.language_field, campaign.language_fallback) == ("lang", "pt_BR")
    assert body["languages"] == {"field": "lang", "fallback": "pt_BR"}


def test_create_names_every_field_at_fault_with_400(world: World) -> None:
    response, body = world.writer(
        "post",
        "/campaigns",
        body={
            "name": " ",
            "phone_number_id": 5,
            "template": {"language": "en_US", "colour": "red"},
            "audience": {"lists": []},
            "frequency_cap": "0/3d",
            "send_window": {"start": "09:00", "end": "09:00", "time_zone": "Mars/Olympus"},
            "link": {"destination": "https://x.example/{{bad name}}"},
            "holdout_percent": 51,
            "attribution_days": 1.5,
            "mapping": {"body": {"1": {"value": "a\u0000b"}}},
            "extra": 1,
        },
    )
    assert response.status_code == 400
    assert body["error"]["code"] == "invalid_request"
    assert set(body["error"]["fields"]) == {
        "extra",
        "name",
        "phone_number_id",
        "template.name",
        "template.colour",
        "audience",
        "frequency_cap",
        "send_window",
        "send_window.time_zone",
        "link.destination",
        "holdout_percent",
        "attribution_days",
        "mapping.body.1.value",
    }
    assert not Campaign.objects.exists()


@pytest.mark.parametrize(
    ("changes", "code", "fields"),
    [
        ({"template": {"name": "nope"}}, "unknown_template", {"template.name"}),
        (
            {"template": {"name": "promo", "language": "fr_FR"}},
            "unknown_template",
            {"template.language"},
        ),
        (
            {"audience": {"lists": ["vip", "ghosts"], "segments": ["nobody"]}},
            "unknown_list",
            {"audience.lists.1", "audience.segments.0"},
        ),
        (
            {"audience": {"lists": ["vip"], "exclude_segments": ["nobody"]}},
            "unknown_segment",
            {"audience.exclude_segments.0"},
        ),
        ({"mapping": {"body": {"1": {"field": "name"}, "2": {"value": "x"}}}}, None, None),
        ({"mapping": {"body": {}}}, "param_mapping_mismatch", {"mapping.body"}),
        ({"mapping": {"colour": {}}}, "param_mapping_mismatch", {"mapping"}),
    ],
)
def test_create_refuses_what_does_not_exist_or_fit_with_422(
    world: World, changes: dict[str, Any], code: str | None, fields: set[str] | None
) -> None:
    response, body = world.writer("post", "/campaigns", body=world.body(**changes))
    assert response.status_code == 422, body
    if code is None:  # a param the template does not have
        assert body["error"]["code"] == "param_mapping_mismatch"
        assert set(body["error"]["fields"]) == {"mapping.body"}
        assert "no body param(s) 2" in body["error"]["fields"]["mapping.body"]
    else:
        assert body["error"]["code"] == code
        assert set(body["error"]["fields"]) == fields
    assert not Campaign.objects.exists()


def test_create_refuses_a_rejected_template_and_an_ambiguous_language(world: World) -> None:
    Template.objects.filter(pk=world.template.pk).update(status=TemplateStatus.REJECTED)
    response, body = world.writer("post", "/campaigns", body=world.body())
    assert (response.status_code, body["error"]["code"]) == (422, "template_not_approved")
    make_template(account=world.number.account, name="promo", language="pt_BR")
    response, body = world.writer("post", "/campaigns", body=world.body(template={"name": "promo"}))
    assert (response.status_code, body["error"]["code"]) == (422, "unknown_template")
    assert "en_US, pt_BR" in body["error"]["fields"]["template.language"]


def test_create_needs_the_campaigns_scope_and_a_number_in_scope(world: World) -> None:
    for caller in (world.sender, world.reader):
        response, body = caller("post", "/campaigns", body=world.body())
        assert (response.status_code, body["error"]["code"]) == (403, "scope_missing")
    response, body = world.stranger("post", "/campaigns", body=world.body())
    assert (response.status_code, body["error"]["code"]) == (403, "phone_number_not_allowed")
    # A key for every number learns that a number does not exist; a scoped one does not.
    everywhere = Caller(_key([], ["campaigns"], all_numbers=True))
    response, body = everywhere("post", "/campaigns", body=world.body(phone_number_id="pn-x"))
    assert (response.status_code, body["error"]["code"]) == (422, "unknown_phone_number")
    response, body = world.writer("post", "/campaigns", body=world.body(phone_number_id="pn-x"))
    assert (response.status_code, body["error"]["code"]) == (403, "phone_number_not_allowed")
    assert not Campaign.objects.exists()


def test_a_replayed_create_is_one_campaign(world: World) -> None:
    headers = {"Idempotency-Key": "spring-1"}
    first, created = world.writer("post", "/campaigns", body=world.body(), headers=headers)
    second, replayed = world.writer("post", "/campaigns", body=world.body(), headers=headers)
    assert (first.status_code, second.status_code) == (201, 200)
    assert second["Idempotent-Replayed"] == "true"
    assert replayed == created and second["Location"] == first["Location"]
    assert Campaign.objects.count() == 1
    other, refused = world.writer(
        "post", "/campaigns", body=world.body(name="Other"), headers=headers
    )
    assert (other.status_code, refused["error"]["code"]) == (409, "idempotency_key_reused")
    assert Campaign.objects.count() == 1
    # A refused create stores no answer: the same key may be used again once it is fixed.
    response, _ = world.writer(
        "post",
        "/campaigns",
        body=world.body(template={"name": "nope"}),
        headers={"Idempotency-Key": "k2"},
    )
    assert response.status_code == 422
    assert not ApiCreated.objects.filter(idempotency_key="k2").exists()


@override_settings(API_MAX_BODY_BYTES=2048)
def test_every_documented_status_of_create_is_real(world: World) -> None:
    call = world.writer
    seen = {
        call("post", "/campaigns", body=world.body(), headers={"Idempotency-Key": "a"})[0],  # 201
        call("post", "/campaigns", body=world.body(), headers={"Idempotency-Key": "a"})[0],  # 200
        call("post", "/campaigns", body=world.body(name=""))[0],  # 400
        call("post", "/campaigns", body=world.body(), key="wb_0123456789_nothing")[0],  # 401
        world.sender("post", "/campaigns", body=world.body())[0],  # 403
        call("post", "/campaigns", body=world.body(name="b"), headers={"Idempotency-Key": "a"})[
            0
        ],  # 409
        call("post", "/campaigns", body=world.body(name="x" * 4000))[0],  # 413
        call("post", "/campaigns", body=world.body(), content_type="text/plain")[0],  # 415
        call("post", "/campaigns", body=world.body(template={"name": "nope"}))[0],  # 422
        call("put", "/campaigns", body=world.body(), check_as="post")[0],  # 405
    }
    tight = _tight(world)
    seen |= {tight("post", "/campaigns", body=world.body())[0] for _ in range(2)}  # 201, 429
    assert {r.status_code for r in seen} == _documented("/campaigns", "post")


# --- GET /campaigns ----------------------------------------------------------------------------


def test_the_list_pages_filters_and_keeps_to_the_keys_numbers(world: World) -> None:
    ids = [_create(world, name=f"c{i}")["id"] for i in range(3)]
    theirs_id = make_campaign(phone_number=world.other_number).pk  # never listed here
    Campaign.objects.filter(pk=ids[1]).update(status=CampaignStatus.PAUSED)
    response, page = world.reader("get", "/campaigns", query="limit=2")
    assert response.status_code == 200
    assert [c["id"] for c in page["data"]] == ids[:2] and page["next_cursor"]
    _, rest = world.reader("get", "/campaigns", query=f"limit=2&cursor={page['next_cursor']}")
    assert [c["id"] for c in rest["data"]] == ids[2:] and rest["next_cursor"] is None
    _, paused = world.writer("get", "/campaigns", query="status=paused")
    assert [c["id"] for c in paused["data"]] == [ids[1]]
    _, mine = world.reader("get", "/campaigns")
    assert theirs_id not in {c["id"] for c in mine["data"]}
    _, theirs = world.stranger("get", "/campaigns")
    assert [c["id"] for c in theirs["data"]] == [theirs_id]


def test_the_list_counts_each_campaigns_messages(world: World) -> None:
    body = _create(world)
    campaign = Campaign.objects.get(pk=body["id"])
    make_message(campaign=campaign, status=MessageStatus.DELIVERED)
    make_message(campaign=campaign, status=MessageStatus.PENDING)
    _, page = world.reader("get", "/campaigns")
    (row,) = page["data"]
    assert (row["counts"]["delivered"], row["counts"]["pending"]) == (1, 1)
    assert row["progress"] == {"total": 2, "done": 1, "remaining": 1, "percent": 50.0}


@pytest.mark.parametrize("query", ["limit=", "status="])
def test_an_empty_limit_or_status_is_refused_not_taken_as_absent(world: World, query: str) -> None:
    response, body = world.reader("get", "/campaigns", query=query)
    assert response.status_code == 400
    assert set(body["error"]["fields"]) == {query.rstrip("=")}


def test_every_documented_status_of_the_list_is_real(world: World) -> None:
    seen = {
        world.reader("get", "/campaigns")[0],  # 200
        world.reader("get", "/campaigns", query="status=sleeping")[0],  # 400
        world.reader("get", "/campaigns", query="cursor=nonsense")[0],  # 400
        world.reader("get", "/campaigns", key="wb_0123456789_nothing")[0],  # 401
        world.sender("get", "/campaigns")[0],  # 403
        world.reader("delete", "/campaigns", check_as="get")[0],  # 405
    }
    tight = _tight(world)
    seen |= {tight("get", "/campaigns")[0] for _ in range(2)}  # 200, 429
    assert {r.status_code for r in seen} == _documented("/campaigns", "get")


# --- GET /campaigns/{id}, /preflight, /report, /results.csv ------------------------------------


def test_a_campaign_reads_with_its_status_reason_counts_and_timestamps(world: World) -> None:
    body = _create(world)
    campaign = Campaign.objects.get(pk=body["id"])
    started = timezone.now() - timedelta(minutes=5)
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.PAUSED, status_reason="template paused by Meta", started_at=started
    )
    for status in (MessageStatus.SENT, MessageStatus.READ, MessageStatus.FAILED):
        make_message(campaign=campaign, status=status)
    response, got = world.reader("get", "/campaigns/{id}", id=campaign.pk)
    assert response.status_code == 200
    assert (got["status"], got["status_reason"]) == ("paused", "template paused by Meta")
    assert got["started_at"] == started.isoformat()
    assert {k: v for k, v in got["counts"].items() if v} == {"sent": 1, "read": 1, "failed": 1}
    assert got["progress"] == {"total": 3, "done": 3, "remaining": 0, "percent": 100.0}
    assert got["template"] == {
        "name": "promo",
        "language": "en_US",
        "category": "MARKETING",
        "status": "APPROVED",
    }


READS = (
    "/campaigns/{id}",
    "/campaigns/{id}/preflight",
    "/campaigns/{id}/report",
    "/campaigns/{id}/results.csv",
)


@pytest.mark.parametrize("path", READS)
def test_every_documented_status_of_each_read_is_real(world: World, path: str) -> None:
    campaign_id = _create(world)["id"]
    seen = {
        world.reader("get", path, id=campaign_id)[0],  # 200
        world.writer("get", path, id=campaign_id)[0],  # 200
        world.reader("get", path, id=campaign_id, key="wb_0123456789_nothing")[0],  # 401
        world.sender("get", path, id=campaign_id)[0],  # 403
        world.stranger("get", path, id=campaign_id)[0],  # 404: another number's
        world.reader("get", path, id=campaign_id + 1000)[0],  # 404: none
        world.reader("get", path, id=2**63)[0],  # 404: past any id
        world.reader("post", path, id=campaign_id, check_as="get")[0],  # 405
    }
    tight = _tight(world)
    seen |= {tight("get", path, id=campaign_id)[0] for _ in range(2)}  # 200, 429
    assert {r.status_code for r in seen} == _documented(path, "get")
    refused = [r for r in seen if r.status_code >= 400]
    assert all(json.loads(r.content)["error"]["code"] for r in refused)


def test_preflight_counts_the_audience_and_reports_blocking_findings(world: World) -> None:
    campaign_id = _create(world, mapping={"body": {"1": {"field": "city"}}})["id"]
    make_contact(
        phone="+5511987659999", name="Opted", contact_list=world.vip, opted_out_at=timezone.now()
    )
    response, report = world.reader("get", "/campaigns/{id}/preflight", id=campaign_id)
    assert response.status_code == 200
    assert (report["contacts"], report["opted_out"], report["audience"]) == (4, 1, 3)
    assert report["ok"] is False
    assert report["missing"] == [
        {"field": "city", "contacts": 3, "examples": [f"+55119876500{i:02d}" for i in range(3)]}
    ]
    levels = {f["level"] for f in report["findings"]}
    assert "error" in levels and "info" in levels


def test_results_csv_streams_one_row_per_recipient(world: World) -> None:
    campaign = Campaign.objects.get(pk=_create(world)["id"])
    make_message(campaign=campaign, to="+5511900000001", status=MessageStatus.DELIVERED)
    make_message(campaign=campaign, to="=HYPERLINK(1)", status=MessageStatus.FAILED)
    response, _ = world.reader("get", "/campaigns/{id}/results.csv", id=campaign.pk)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f"campaign-{campaign.pk}-results.csv" in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["phone"], r["status"]) for r in rows] == [
        ("+5511900000001", "delivered"),
        ("'=HYPERLINK(1)", "failed"),
    ]
    assert {"replies", "opted_out", "clicks", "conversions"} <= set(rows[0])


def test_the_report_shows_figures_rates_and_cost(world: World) -> None:
    campaign = Campaign.objects.get(pk=_create(world)["id"])
    for status in [MessageStatus.READ] * 2 + [MessageStatus.DELIVERED, MessageStatus.SENT]:
        make_message(campaign=campaign, status=status)
    make_message(campaign=campaign, status=MessageStatus.FAILED, last_error_code=131026)
    make_message(campaign=campaign, status=MessageStatus.SKIPPED, skip_reason="opted out")
    response, report = world.reader("get", "/campaigns/{id}/report", id=campaign.pk)
    assert response.status_code == 200
    figures = report["figures"]
    assert (figures["audience"], figures["sent"], figures["delivered"], figures["read"]) == (
        6,
        4,
        3,
        2,
    )
    assert (figures["failed"], figures["skipped"], figures["replies"]) == (1, 1, 0)
    assert report["rates"]["delivered"] == 0.75 and report["rates"]["read"] == round(2 / 3, 4)
    assert report["rates"]["failed"] == round(1 / 6, 4) and report["rates"]["replied"] == 0.0
    assert report["failures"] == [{"status": "failed", "code": 131026, "title": "", "count": 1}]
    assert report["skips"] == [{"reason": "opted out", "messages": 1}]
    assert report["cost"]["charged"] == 0
    assert report["clicks"] == {"total": 0, "unique": 0, "previews": 0}
    assert report["conversions"]["conversions"] == 0
    assert report["conversions"]["lift"] is None


# --- launch, pause, resume, cancel -------------------------------------------------------------


def test_launch_starts_a_draft_and_a_second_launch_changes_nothing(world: World) -> None:
    campaign_id = _create(world)["id"]
    response, launched = world.writer("post", "/campaigns/{id}/launch", id=campaign_id)
    assert response.status_code == 200
    assert launched["campaign"]["status"] == "running"
    assert launched["launch"] == {
        "already_started": False,
        "recipients": 3,
        "pending": 3,
        "skipped": 0,
        "waiting_for_window": 0,
    }
    assert launched["campaign"]["counts"]["pending"] == 3
    again, repeated = world.writer("post", "/campaigns/{id}/launch", id=campaign_id, body={})
    assert again.status_code == 200 and repeated["launch"]["already_started"] is True
    assert Message.objects.filter(campaign_id=campaign_id).count() == 3


def test_launch_at_a_later_time_schedules_it(world: World) -> None:
    campaign_id = _create(world)["id"]
    at = (timezone.now() + timedelta(days=1)).replace(microsecond=0)
    response, launched = world.writer(
        "post", "/campaigns/{id}/launch", id=campaign_id, body={"at": at.isoformat()}
    )
    assert response.status_code == 200
    assert launched["campaign"]["status"] == "scheduled"
    assert launched["campaign"]["scheduled_at"] == at.isoformat()
    response, refused = world.writer(
        "post", "/campaigns/{id}/launch", id=campaign_id, body={"at": "tomorrow"}
    )
    assert (response.status_code, set(refused["error"]["fields"])) == (400, {"at"})


def test_a_refused_launch_is_422_with_the_blocking_findings(world: World) -> None:
    Template.objects.filter(pk=world.template.pk).update(status=TemplateStatus.PENDING)
    campaign_id = _create(world)["id"]
    response, refused = world.writer("post", "/campaigns/{id}/launch", id=campaign_id)
    assert response.status_code == 422
    error = refused["error"]
    assert error["code"] == "launch_refused"
    assert "PENDING" in error["fields"]["launch"]
    assert any("PENDING" in text for key, text in error["fields"].items() if key != "launch")
    assert Campaign.objects.get(pk=campaign_id).status == CampaignStatus.DRAFT


@pytest.mark.parametrize(
    ("status", "path"),
    [
        (CampaignStatus.PAUSED, "/campaigns/{id}/launch"),
        (CampaignStatus.COMPLETED, "/campaigns/{id}/launch"),
        (CampaignStatus.CANCELLED, "/campaigns/{id}/launch"),
        (CampaignStatus.DRAFT, "/campaigns/{id}/pause"),
        (CampaignStatus.COMPLETED, "/campaigns/{id}/pause"),
        (CampaignStatus.DRAFT, "/campaigns/{id}/resume"),
        (CampaignStatus.SCHEDULED, "/campaigns/{id}/resume"),
        (CampaignStatus.CANCELLED, "/campaigns/{id}/resume"),
        (CampaignStatus.COMPLETED, "/campaigns/{id}/cancel"),
        (CampaignStatus.CANCELLED, "/campaigns/{id}/cancel"),
    ],
)
def test_a_transition_that_does_not_apply_is_409_naming_the_status(
    world: World, status: str, path: str
) -> None:
    campaign_id = _create(world)["id"]
    Campaign.objects.filter(pk=campaign_id).update(status=status)
    response, refused = world.writer("post", path, id=campaign_id)
    assert response.status_code == 409
    assert refused["error"]["code"] == "campaign_status_conflict"
    assert refused["error"]["fields"] == {"status": status}
    assert status in refused["error"]["message"]
    assert Campaign.objects.get(pk=campaign_id).status == status


def test_pause_resume_and_cancel_move_a_running_campaign(world: World) -> None:
    campaign_id = _create(world)["id"]
    world.writer("post", "/campaigns/{id}/launch", id=campaign_id)
    response, paused = world.writer("post", "/campaigns/{id}/pause", id=campaign_id)
    assert response.status_code == 200 and paused["status"] == "paused"
    assert paused["status_reason"] == "paused through the API (key k)"
    again, still = world.writer("post", "/campaigns/{id}/pause", id=campaign_id)
    assert again.status_code == 200 and still["status"] == "paused"
    response, resumed = world.writer("post", "/campaigns/{id}/resume", id=campaign_id)
    assert response.status_code == 200 and resumed["status"] == "running"
    assert resumed["status_reason"] == ""
    again, still = world.writer("post", "/campaigns/{id}/resume", id=campaign_id)
    assert again.status_code == 200 and still["status"] == "running"
    response, cancelled = world.writer("post", "/campaigns/{id}/cancel", id=campaign_id)
    assert response.status_code == 200
    assert cancelled["cancelled_messages"] == 3
    assert cancelled["campaign"]["status"] == "cancelled"
    assert cancelled["campaign"]["counts"]["cancelled"] == 3


def test_resuming_a_campaign_paused_before_its_launch_launches_it_or_says_why(
    world: World,
) -> None:
    campaign_id = _create(world)["id"]
    Campaign.objects.filter(pk=campaign_id).update(status=CampaignStatus.PAUSED)
    Template.objects.filter(pk=world.template.pk).update(status=TemplateStatus.PAUSED)
    response, refused = world.writer("post", "/campaigns/{id}/resume", id=campaign_id)
    assert (response.status_code, refused["error"]["code"]) == (422, "launch_refused")
    assert Campaign.objects.get(pk=campaign_id).status == CampaignStatus.PAUSED
    Template.objects.filter(pk=world.template.pk).update(status=TemplateStatus.APPROVED)
    response, resumed = world.writer("post", "/campaigns/{id}/resume", id=campaign_id)
    assert (response.status_code, resumed["status"]) == (200, "running")
    assert resumed["counts"]["pending"] == 3


TRANSITIONS = (
    "/campaigns/{id}/launch",
    "/campaigns/{id}/pause",
    "/campaigns/{id}/resume",
    "/campaigns/{id}/cancel",
)


@pytest.mark.parametrize("path", TRANSITIONS)
@override_settings(API_MAX_BODY_BYTES=1024)
def test_every_documented_status_of_each_transition_is_real(world: World, path: str) -> None:
    campaign_id = _create(world)["id"]
    other_id = _create(world)["id"]
    Campaign.objects.filter(pk=campaign_id).update(
        status=CampaignStatus.PAUSED if path.endswith("resume") else CampaignStatus.RUNNING
    )
    if path.endswith("launch"):
        Campaign.objects.filter(pk=campaign_id).update(status=CampaignStatus.DRAFT)
    call = world.writer
    seen = {
        call("post", path, id=campaign_id)[0],  # 200
        call("post", path, id=campaign_id, key="wb_0123456789_nothing")[0],  # 401
        world.reader("post", path, id=campaign_id)[0],  # 403: a read key may not write
        world.stranger("post", path, id=campaign_id)[0],  # 404
        call("post", path, id=campaign_id + 1000)[0],  # 404
        call("get", path, id=campaign_id, check_as="post")[0],  # 405
    }
    Campaign.objects.filter(pk=other_id).update(status=CampaignStatus.CANCELLED)
    seen.add(call("post", path, id=other_id)[0])  # 409
    if path.endswith("launch"):
        seen |= {
            call("post", path, id=campaign_id, raw=b"{")[0],  # 400
            call("post", path, id=campaign_id, body={"pad": "x" * 2000})[0],  # 413
            call("post", path, id=campaign_id, raw=b"at=1", content_type="text/plain")[0],  # 415
        }
    if path.endswith(("launch", "resume")):
        refused_id = _create(world)["id"]
        Template.objects.filter(pk=world.template.pk).update(status=TemplateStatus.PAUSED)
        Campaign.objects.filter(pk=refused_id).update(
            status=CampaignStatus.PAUSED if path.endswith("resume") else CampaignStatus.DRAFT
        )
        seen.add(call("post", path, id=refused_id)[0])  # 422
    tight = _tight(world)
    seen |= {tight("post", path, id=campaign_id)[0] for _ in range(2)}  # 200 or 409, 429
    assert {r.status_code for r in seen} == _documented(path, "post")


# --- no request makes these operations answer 500 or off their description --------------------

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Where one part of a valid create is replaced (or removed, or joined by a stray field).
CREATE_PATHS = [
    (),
    ("name",),
    ("phone_number_id",),
    ("template",),
    ("template", "name"),
    ("template", "language"),
    ("template", "languages"),
    ("mapping",),
    ("mapping", "body"),
    ("mapping", "body", "1"),
    ("mapping", "body", "1", "field"),
    ("audience",),
    ("audience", "lists"),
    ("audience", "lists", 0),
    ("audience", "segments"),
    ("frequency_cap",),
    ("frequency_cap_defer",),
    ("send_window",),
    ("send_window", "start"),
    ("send_window", "time_zone"),
    ("link",),
    ("link", "destination"),
    ("holdout_percent",),
    ("attribution_days",),
]


def _full_body(world: World) -> dict[str, Any]:
    return world.body(
        frequency_cap="2/7d",
        send_window={"start": "09:00", "end": "20:00", "time_zone": "UTC"},
        link={"destination": "https://shop.example.com/?c={{name}}"},
        holdout_percent=5,
        attribution_days=7,
    )


@st.composite
def near_valid_creates(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(base))
    path = draw(st.sampled_from(CREATE_PATHS))
    if not path:
        return body
    parent: Any = body
    for step in path[:-1]:
        parent = parent[step]
    action = draw(st.sampled_from(["replace", "remove", "stray"]))
    if action == "remove" and isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif action == "stray" and isinstance(parent, dict):
        parent[draw(junk_text)] = draw(json_values)
    else:
        parent[path[-1]] = draw(json_values)
    return body


def test_no_create_answers_500_or_off_the_description(world: World) -> None:
    statuses = _documented("/campaigns", "post")

    @FUZZ
    @given(
        body=st.one_of(near_valid_creates(_full_body(world)), json_values),
        key=st.one_of(
            st.none(),
            st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=8),
        ),
    )
    def check(body: Any, key: str | None) -> None:
        headers = {} if key is None else {"Idempotency-Key": key}
        response, _ = world.writer("post", "/campaigns", raw=encoded(body), headers=headers)
        assert response.status_code in statuses
        event(str(response.status_code))
        seen.add(response.status_code)

    seen: set[int] = set()
    check()
    assert {201, 400, 422} <= seen, seen  # it reached the creates, not only refusals


def test_no_launch_body_answers_500_or_off_the_description(world: World) -> None:
    campaign_id = _create(world)["id"]
    statuses = _documented("/campaigns/{id}/launch", "post")
    stamps = st.datetimes(
        timezones=st.sampled_from(
            [UTC, ZoneInfo("America/Sao_Paulo"), ZoneInfo("Pacific/Kiritimati")]
        )
    ).map(lambda d: d.isoformat())
    bodies = st.one_of(
        st.fixed_dictionaries({"at": st.one_of(stamps, junk_text, json_values)}), json_values
    )

    @FUZZ
    @given(body=bodies)
    def check(body: Any) -> None:
        Campaign.objects.filter(pk=campaign_id).update(status=CampaignStatus.DRAFT)
        response, _ = world.writer(
            "post", "/campaigns/{id}/launch", id=campaign_id, raw=encoded(body)
        )
        assert response.status_code in statuses
        event(str(response.status_code))

    check()


def test_a_launch_at_a_moment_off_the_calendar_is_400(world: World) -> None:
    campaign_id = _create(world)["id"]
    for at in (
        "9999-12-31T23:59:59-05:00",  # after UTC's last moment
        "2026-02-30T10:00:00Z",
        "2026-03-01T10:00:00",  # no offset
    ):
        response, refused = world.writer(
            "post", "/campaigns/{id}/launch", id=campaign_id, body={"at": at}
        )
        assert (response.status_code, set(refused["error"]["fields"])) == (400, {"at"}), at
    assert Campaign.objects.get(pk=campaign_id).status == CampaignStatus.DRAFT
    # Before UTC's first moment: past, so now.
    response, launched = world.writer(
        "post", "/campaigns/{id}/launch", id=campaign_id, body={"at": "0001-01-01T00:00:00+05:00"}
    )
    assert (response.status_code, launched["campaign"]["status"]) == (200, "running")
