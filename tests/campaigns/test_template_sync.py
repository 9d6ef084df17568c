"""The template catalogue: Meta's listing (the simulator over real HTTP) into Template rows."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from typing import Any

import django_rq
import pytest
from django.contrib.admin.sites import AdminSite
from django.contrib.messages.storage.fallback import FallbackStorage
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from campaigns.catalogue.components import components_parse
from campaigns.models import (
    BusinessAccount,
    CampaignStatus,
    HeaderFormat,
    PhoneNumber,
    Template,
    TemplateStatus,
)
from delivery.cloud.client import parse_template_page
from delivery.cloud.template_sync import sync_error_text, template_sync_schedule, templates_sync
from delivery.simulator.server import SimulatorServer
from tests.engine_support import running_simulator
from tests.factories import make_account, make_campaign, make_phone_number, make_template
from whatsblast.admin.catalogue import BusinessAccountAdmin
from whatsblast.jobs import template_sync_all_job
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db

# Meta's shapes, as GET message_templates returns them.
NAMED_WELCOME = [
    {
        "type": "HEADER",
        "format": "TEXT",
        "text": "Welcome {{shop}}",
        "example": {"header_text_named_params": [{"param_name": "shop", "example": "Lojas"}]},
    },
    {
        "type": "BODY",
        "text": "Hi {{first_name}}, your code is {{code}}.",
        "example": {
            "body_text_named_params": [
                {"param_name": "first_name", "example": "Pablo"},
                {"param_name": "code", "example": "X1"},
            ]
        },
    },
    {"type": "FOOTER", "text": "Reply STOP to opt out"},
]
POSITIONAL_MEDIA = [
    {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::aW1hZ2U="]}},
    {
        "type": "BODY",
        "text": "Shop through {{1}} with code {{2}} for {{3}} off.",
        "example": {"body_text": [["Sunday", "25OFF", "25%"]]},
    },
    {
        "type": "BUTTONS",
        "buttons": [
            {"type": "QUICK_REPLY", "text": "Stop promotions"},
            {
                "type": "URL",
                "text": "Shop",
                "url": "https://shop.example/p?c={{1}}",
                "example": ["https://shop.example/p?c=summer"],
            },
            {"type": "PHONE_NUMBER", "text": "Call", "phone_number": "15550051310"},
        ],
    },
]


@pytest.fixture
def sim() -> Iterator[SimulatorServer]:
    with running_simulator() as server:
        yield server


def account_on(sim: SimulatorServer, *, token: str = "sim-token") -> BusinessAccount:
    account = make_account()
    make_phone_number(account=account, api_base_url=sim.url, access_token=token)
    return account


def publish(sim: SimulatorServer, account: BusinessAccount, name: str, **spec: Any) -> None:
    spec.setdefault("components", [{"type": "BODY", "text": "Hello"}])
    sim.add_template(
        name=name, language=spec.pop("language", "en_US"), waba_id=account.waba_id, **spec
    )


# --- parsing ----------------------------------------------------------------------------------


def test_named_params_with_their_examples_and_a_text_header_param() -> None:
    parsed = components_parse(NAMED_WELCOME)
    assert parsed.body_param_names == ["first_name", "code"]
    assert parsed.body_param_count == 0
    assert parsed.body_examples == {"first_name": "Pablo", "code": "X1"}
    assert (parsed.header_format, parsed.header_param, parsed.header_example) == (
        HeaderFormat.TEXT,
        "shop",
        "Lojas",
    )
    assert parsed.problems == []


def test_positional_params_media_header_and_buttons() -> None:
    parsed = components_parse(POSITIONAL_MEDIA)
    assert parsed.body_param_count == 3 and parsed.body_param_names == []
    assert parsed.body_examples == ["Sunday", "25OFF", "25%"]
    assert (parsed.header_format, parsed.header_param) == (HeaderFormat.IMAGE, "")
    assert [(b["index"], b["sub_type"], b["param"]) for b in parsed.buttons] == [
        (0, "quick_reply", "optional"),
        (1, "url", "required"),
        (2, "", "none"),
    ]
    assert parsed.buttons[1]["example"] == "https://shop.example/p?c=summer"


@pytest.mark.parametrize(
    ("components", "problem"),
    [
        ([{"type": "BODY", "text": "{{1}} and {{name}}"}], "mixes positional"),
        ([{"type": "BODY", "text": "{{1}} and {{3}}"}], "without gaps"),
        (
            [{"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE"}]}],
            "OTP buttons are not supported yet",
        ),
        ([{"type": "HEADER", "format": "TEXT", "text": "{{1}} {{2}}"}], "one parameter"),
    ],
)
def test_templates_campaigns_cannot_use_are_kept_with_the_reason(
    components: list[dict[str, Any]], problem: str
) -> None:
    assert any(problem in p for p in components_parse(components).problems)


def test_a_text_header_without_placeholder_and_a_location_header() -> None:
    static = components_parse([{"type": "HEADER", "format": "TEXT", "text": "Big sale"}])
    assert (static.header_format, static.header_param, static.header_text) == (
        "TEXT",
        "",
        "Big sale",
    )
    location = components_parse([{"type": "HEADER", "format": "LOCATION"}])
    assert location.header_format == HeaderFormat.LOCATION
    assert location.problems == ["a location header needs a parameter campaigns cannot send"]


# --- the sync against the simulator -----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_paging_over_250_templates(sim: SimulatorServer) -> None:
    account = account_on(sim)
    for i in range(250):
        publish(sim, account, f"tpl_{i:03d}", components=POSITIONAL_MEDIA)
    report = templates_sync(account=account)
    assert report.ok, report.error
    assert (report.listed, report.pages, report.created, report.changed) == (250, 3, 250, 0)
    assert Template.objects.filter(account=account).count() == 250
    last = Template.objects.get(account=account, name="tpl_249")
    assert last.body_param_count == 3 and last.header_format == HeaderFormat.IMAGE
    assert last.meta_template_id and last.synced_at is not None
    # A second run finds nothing new and nothing changed.
    again = templates_sync(account=account)
    assert (again.listed, again.created, again.changed, again.removed) == (250, 0, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_named_positional_media_and_url_button_templates_land_parsed(
    sim: SimulatorServer,
) -> None:
    account = account_on(sim)
    publish(sim, account, "welcome", components=NAMED_WELCOME, category="UTILITY")
    publish(sim, account, "summer", language="pt_BR", components=POSITIONAL_MEDIA)
    publish(sim, account, "draft", status="PENDING")
    report = templates_sync(account=account)
    assert report.ok and report.listed == 3
    welcome = Template.objects.get(account=account, name="welcome")
    assert welcome.category == "UTILITY" and welcome.status == TemplateStatus.APPROVED
    assert welcome.body_param_names == ["first_name", "code"]
    assert welcome.header_param == "shop" and welcome.header_takes_param
    assert welcome.body_text == "Hi {{first_name}}, your code is {{code}}."
    summer = Template.objects.get(account=account, name="summer", language="pt_BR")
    assert summer.body_param_count == 3 and summer.header_takes_param
    assert summer.buttons[1]["url"] == "https://shop.example/p?c={{1}}"
    assert summer.components == POSITIONAL_MEDIA
    assert Template.objects.get(account=account, name="draft").status == TemplateStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_a_template_removed_upstream_is_marked_not_deleted_and_its_campaigns_pause(
    sim: SimulatorServer,
) -> None:
    account = account_on(sim)
    for name in ("keep", "gone"):
        publish(sim, account, name, components=[{"type": "BODY", "text": "Hi {{1}}"}])
    assert templates_sync(account=account).ok
    gone = Template.objects.get(account=account, name="gone")
    campaign = make_campaign(
        phone_number=account.phone_numbers.get(), template=gone, status=CampaignStatus.RUNNING
    )
    # Meta stops listing "gone".
    sim.reset(templates=True)
    publish(sim, account, "keep", components=[{"type": "BODY", "text": "Hi {{1}}"}])
    report = templates_sync(account=account)
    assert (report.listed, report.removed, report.campaigns_paused) == (1, 1, 1)
    gone.refresh_from_db()
    assert gone.status == TemplateStatus.DELETED and gone.removed_upstream_at is not None
    assert "no longer listed" in gone.status_reason
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    assert Template.objects.get(account=account, name="keep").removed_upstream_at is None
    # Listed again later: back, and no longer marked.
    publish(sim, account, "gone", components=[{"type": "BODY", "text": "Hi {{1}}"}])
    assert templates_sync(account=account).changed == 1
    gone.refresh_from_db()
    assert gone.status == TemplateStatus.APPROVED and gone.removed_upstream_at is None


@pytest.mark.django_db(transaction=True)
def test_templates_never_listed_by_meta_are_left_alone(sim: SimulatorServer) -> None:
    account = account_on(sim)
    typed = make_template(account=account, name="typed_by_hand")
    report = templates_sync(account=account)
    assert report.ok and (report.listed, report.removed) == (0, 0)
    typed.refresh_from_db()
    assert typed.status == TemplateStatus.APPROVED and typed.removed_upstream_at is None


@pytest.mark.django_db(transaction=True)
def test_a_status_change_upstream_pauses_the_campaigns_of_that_template(
    sim: SimulatorServer,
) -> None:
    account = account_on(sim)
    publish(sim, account, "promo")
    templates_sync(account=account)
    template = Template.objects.get(account=account, name="promo")
    campaign = make_campaign(
        phone_number=account.phone_numbers.get(),
        template=template,
        param_mapping={"body": {}},
        status=CampaignStatus.RUNNING,
    )
    publish(sim, account, "promo", status="PAUSED")
    report = templates_sync(account=account)
    assert report.changed == 1 and report.campaigns_paused == 1
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_api_is_reported_and_nothing_changes() -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    account = make_account()
    make_phone_number(account=account, api_base_url=f"http://127.0.0.1:{port}")
    make_template(account=account, name="kept", synced_at="2026-01-01T00:00:00Z")
    report = templates_sync(account=account)
    assert not report.ok and report.error.startswith(f"could not reach http://127.0.0.1:{port}")
    kept = Template.objects.get(account=account, name="kept")
    assert kept.status == TemplateStatus.APPROVED and kept.removed_upstream_at is None


@pytest.mark.django_db(transaction=True)
def test_a_refused_token_is_reported_without_the_token(sim: SimulatorServer) -> None:
    account = account_on(sim, token="")  # no bearer token: Graph answers 190
    report = templates_sync(account=account)
    assert not report.ok
    assert report.error.startswith("Meta refused the access token (code 190)")


def test_an_account_without_a_number_is_reported() -> None:
    report = templates_sync(account=make_account(waba_id="lonely"))
    assert report.error == "WABA lonely has no phone number, so no access token to list with"


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (
            400,
            {"code": 80007, "message": "(#80007) Rate limit hit", "type": "OAuthException"},
            "Meta's rate limit for management calls (code 80007), retry in 60s",
        ),
        (
            401,
            {"code": 190, "message": "Error validating access token", "error_subcode": 463},
            "Meta refused the access token (code 190): Error validating access token",
        ),
        (500, {"code": 2, "message": "Service temporarily unavailable"}, "(code 2)"),
    ],
)
def test_graph_errors_read_as_operator_sentences(
    status: int, error: dict[str, Any], expected: str
) -> None:
    page = parse_template_page(
        status=status,
        body=json.dumps({"error": error}).encode(),
        headers={"Retry-After": "60"},
        latency_s=0.1,
    )
    assert not hasattr(page, "templates")
    assert expected in sync_error_text(page, base_url="https://graph.facebook.com")  # type: ignore[arg-type]


# --- entry points: command, admin action, periodic job ----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_command_syncs_one_waba_and_prints_json(sim: SimulatorServer) -> None:
    account = account_on(sim)
    other = account_on(sim)
    publish(sim, account, "mine")
    publish(sim, other, "theirs")
    out = io.StringIO()
    call_command("template", "sync", "--waba", account.waba_id, "--json", stdout=out)
    [report] = json.loads(out.getvalue())
    assert report["waba_id"] == account.waba_id and report["listed"] == 1 and report["ok"]
    assert not Template.objects.filter(account=other).exists()
    with pytest.raises(CommandError, match="no business account"):
        call_command("template", "sync", "--waba", "nope", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_command_fails_when_a_sync_fails(sim: SimulatorServer) -> None:
    account_on(sim, token="")
    with pytest.raises(CommandError, match="Meta refused the access token"):
        call_command("template", "sync", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_admin_action_syncs_the_selected_accounts(sim: SimulatorServer) -> None:
    account = account_on(sim)
    publish(sim, account, "from_admin")
    request = RequestFactory().post("/admin/campaigns/businessaccount/")
    request.session = {}  # type: ignore[attr-defined]
    storage = FallbackStorage(request)
    request._messages = storage  # type: ignore[attr-defined]
    admin = BusinessAccountAdmin(BusinessAccount, AdminSite())
    admin.sync_templates(request, BusinessAccount.objects.filter(pk=account.pk))
    assert Template.objects.filter(account=account, name="from_admin").exists()
    assert [str(m) for m in storage] == [
        f"WABA {account.waba_id}: 1 templates, 1 new, 0 changed, 0 removed upstream"
    ]


@pytest.mark.django_db(transaction=True)
def test_the_periodic_sync_is_enqueued_once_per_interval_and_syncs_every_account(
    sim: SimulatorServer,
) -> None:
    first, second = account_on(sim), account_on(sim)
    publish(sim, first, "a")
    publish(sim, second, "b")
    assert maintenance_tick()["templates_sync_queued"] is True
    assert template_sync_schedule() is False  # the next ticks within the interval
    queue = django_rq.get_queue("maintenance")
    names = [job.func_name for job in queue.get_jobs()]
    assert names.count("whatsblast.jobs.template_sync_all_job") == 1
    reports = template_sync_all_job()
    assert sorted((r["waba_id"], r["listed"]) for r in reports) == sorted(
        [(first.waba_id, 1), (second.waba_id, 1)]
    )
    assert PhoneNumber.objects.count() == 2
