"""``/api/v1/`` campaigns: create, pre-flight, run, status, report and results (thin views).

Each view makes the checks every API view makes (``api_common``: key, quota, scope, body),
reads the request with ``delivery.api.campaigns``, calls the services the admin's pages
call, and answers with that module's renderers. Writing needs the ``campaigns`` scope;
reading accepts ``campaigns`` or ``read``. A campaign on a number outside the key's scope
is answered 404, as a missing one.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import URLPattern, path, reverse

from campaigns.models import Campaign, CampaignStatus
from campaigns.state import LifecycleError, campaign_pause
from delivery.api.campaigns import (
    campaign_draft_create,
    campaign_draft_parse,
    campaign_of_key,
    campaign_render,
    campaigns_of_key,
    campaigns_page,
    launch_at_parse,
    launch_refused,
    launch_render,
    report_render,
    status_conflict,
    status_filter_parse,
)
from delivery.api.cursors import limit_parse
from delivery.campaigns.exports import campaign_results_csv, campaign_results_filename
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.campaigns.lifecycle import campaign_cancel, campaign_resume
from delivery.campaigns.preflight import campaign_preflight
from delivery.campaigns.pricing import campaign_costs, cost_total, rate_card_currency
from delivery.campaigns.progress import (
    campaign_by_language,
    campaign_failures,
    campaign_skips,
)
from delivery.campaigns.status_counts import campaigns_status_counts
from delivery.engagement.clicks import campaign_clicks
from delivery.engagement.roi import campaign_roi
from delivery.models import ApiKey, ApiScope
from whatsblast.figures import campaign_figures, export_extra_columns
from whatsblast.views.api_common import api_view, authenticate, create_answer, json_body

WRITE = (ApiScope.CAMPAIGNS,)
READ = (ApiScope.CAMPAIGNS, ApiScope.READ)


def _url(request: HttpRequest, campaign_id: int) -> str:
    return request.build_absolute_uri(reverse("api:campaign", args=[campaign_id]))


def _counts(campaign_id: int) -> dict[str, int]:
    return campaigns_status_counts(campaign_ids=[campaign_id])[campaign_id]


def _campaign_answer(request: HttpRequest, campaign: Campaign) -> dict[str, Any]:
    return campaign_render(campaign, counts=_counts(campaign.pk), url=_url(request, campaign.pk))


def _optional_body(request: HttpRequest) -> dict[str, Any]:
    """The JSON body when one is sent; ``{}`` for none (the body is optional)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 1  # json_body answers the malformed header
    return json_body(request) if length else {}


def _by(api_key: ApiKey) -> str:
    return f"through the API (key {api_key.name})"


@api_view("GET", "POST")
def campaigns(request: HttpRequest) -> HttpResponse:
    """GET: the key's campaigns, a page at a time (``?status=``). POST: create a draft."""
    if request.method == "GET":
        api_key = authenticate(request, *READ)
        status = status_filter_parse(request.GET.get("status"))
        limit = limit_parse(request.GET.get("limit"))
        found = campaigns_of_key(api_key)
        if status is not None:
            found = found.filter(status=status)
        page = campaigns_page(
            found,
            cursor=request.GET.get("cursor") or None,
            limit=limit,
            counts_of=lambda ids: campaigns_status_counts(campaign_ids=ids),
            url_of=lambda pk: _url(request, pk),
        )
        return JsonResponse(page)
    api_key = authenticate(request, *WRITE)
    data = json_body(request)
    draft = campaign_draft_parse(data)

    def create() -> tuple[int, dict[str, Any]]:
        campaign = campaign_draft_create(api_key=api_key, draft=draft)
        # A new draft has no messages yet.
        return 201, campaign_render(campaign, counts={}, url=_url(request, campaign.pk))

    response = create_answer(
        request, api_key=api_key, operation="campaigns.create", data=data, create=create
    )
    if response.status_code in (200, 201):
        response["Location"] = _url(request, int(_json(response)["id"]))
    return response


def _json(response: HttpResponse) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(response.content)
    return body


@api_view("GET")
def campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    api_key = authenticate(request, *READ)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    return JsonResponse(_campaign_answer(request, found))


@api_view("GET")
def preflight(request: HttpRequest, campaign_id: int) -> HttpResponse:
    api_key = authenticate(request, *READ)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    return JsonResponse(campaign_preflight(campaign=found).as_dict())


@api_view("POST")
def launch(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Launch now, or at ``{"at": ...}``. Launching a running campaign again changes
    nothing and answers 200 (``already_started``); a paused, completed or cancelled one is
    a 409; a launch the checks refuse is a 422 with the pre-flight's blocking findings."""
    api_key = authenticate(request, *WRITE)
    at = launch_at_parse(_optional_body(request))
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    try:
        summary = campaign_start(campaign=found, at=at)
    except LaunchError as exc:
        findings = campaign_preflight(campaign=found).as_dict()["findings"]
        raise launch_refused(str(exc), findings) from None
    if summary.already_started and summary.status != CampaignStatus.RUNNING:
        raise status_conflict(found, status=summary.status, action="launched")
    found.refresh_from_db()
    return JsonResponse(
        launch_render(
            found,
            summary=summary.as_dict(),
            counts=_counts(found.pk),
            url=_url(request, found.pk),
        )
    )


@api_view("POST")
def pause(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Stop claiming at once; pausing a paused campaign changes nothing."""
    api_key = authenticate(request, *WRITE)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    try:
        paused = campaign_pause(campaign=found, reason=f"paused {_by(api_key)}")
    except LifecycleError:
        raise status_conflict(found, status=found.status, action="paused") from None
    return JsonResponse(_campaign_answer(request, paused))


@api_view("POST")
def resume(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Continue a paused campaign; resuming a running one changes nothing."""
    api_key = authenticate(request, *WRITE)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    try:
        resumed = campaign_resume(campaign=found)
    except LifecycleError:
        found.refresh_from_db()
        raise status_conflict(found, status=found.status, action="resumed") from None
    except LaunchError as exc:  # paused while scheduled: resuming launches it
        findings = campaign_preflight(campaign=found).as_dict()["findings"]
        raise launch_refused(str(exc), findings) from None
    return JsonResponse(_campaign_answer(request, resumed))


@api_view("POST")
def cancel(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Cancel: every message not yet handed to Meta becomes cancelled."""
    api_key = authenticate(request, *WRITE)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    try:
        cancelled = campaign_cancel(campaign=found, reason=f"cancelled {_by(api_key)}")
    except LifecycleError:
        found.refresh_from_db()
        raise status_conflict(found, status=found.status, action="cancelled") from None
    found.refresh_from_db()
    return JsonResponse(
        {"campaign": _campaign_answer(request, found), "cancelled_messages": cancelled}
    )


@api_view("GET")
def report(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The figures of the admin's report, from the services behind it."""
    api_key = authenticate(request, *READ)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    counts = _counts(found.pk)
    figures = campaign_figures(campaign_id=found.pk, status_counts=counts)
    costs = campaign_costs(campaign=found)
    return JsonResponse(
        report_render(
            found,
            counts=counts,
            figures=figures,
            failures=[group.__dict__ for group in campaign_failures(campaign=found)],
            skips=campaign_skips(campaign=found),
            cost=cost_total(costs, card_currency=rate_card_currency()).as_dict(),
            cost_lines=[line.as_dict() for line in costs],
            clicks=campaign_clicks(found.pk),
            roi=campaign_roi(found, costs=costs),
            by_language=campaign_by_language(campaign=found),
        )
    )


@api_view("GET")
def results_csv(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """One CSV row per recipient, streamed: the admin's export, with the same columns."""
    api_key = authenticate(request, *READ)
    found = campaign_of_key(api_key=api_key, campaign_id=campaign_id)
    response = StreamingHttpResponse(
        campaign_results_csv(campaign=found, extra=export_extra_columns()),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{campaign_results_filename(found)}"'
    # api_view types its views as returning HttpResponse; a streamed one is its sibling
    # (HttpResponseBase), which the wrapper passes on untouched.
    return cast(HttpResponse, response)


urlpatterns: list[URLPattern] = [
    path("campaigns", campaigns, name="campaigns"),
    path("campaigns/<int:campaign_id>", campaign, name="campaign"),
    path("campaigns/<int:campaign_id>/preflight", preflight, name="campaign_preflight"),
    path("campaigns/<int:campaign_id>/launch", launch, name="campaign_launch"),
    path("campaigns/<int:campaign_id>/pause", pause, name="campaign_pause"),
    path("campaigns/<int:campaign_id>/resume", resume, name="campaign_resume"),
    path("campaigns/<int:campaign_id>/cancel", cancel, name="campaign_cancel"),
    path("campaigns/<int:campaign_id>/report", report, name="campaign_report"),
    path("campaigns/<int:campaign_id>/results.csv", results_csv, name="campaign_results"),
]
