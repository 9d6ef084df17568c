"""``/api/v1/`` contacts, lists, segments and templates: thin views over one service each
(the checks every view makes, in their order: ``api_common``).

Writing contacts, lists and segments takes the ``contacts`` scope; reading them, and the
templates, ``contacts`` or ``read``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path
from django.utils import timezone

from delivery.api.contacts import (
    API_OPT_OUT_REASON,
    contact_get,
    contact_render,
    contacts_filtered,
    contacts_request_parse,
    contacts_upsert,
)
from delivery.api.directory import (
    list_create,
    list_render,
    list_request_parse,
    lists_counted,
    segment_count,
    segment_create,
    segment_render,
    segment_request_parse,
    segments_listed,
    template_get,
    template_render,
    templates_filtered,
)
from delivery.api.errors import ApiProblem
from delivery.consent import contacts_resume, contacts_stop
from delivery.models import ApiScope
from webhooks.erasure import ContactNotFound, contact_erase
from whatsblast.views.api_common import (
    api_view,
    authenticate,
    create_answer,
    json_body,
    page_answer,
)

READ = (ApiScope.CONTACTS, ApiScope.READ)


@api_view("GET", "POST")
def contacts(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        authenticate(request, *READ)
        return page_answer(request, contacts_filtered(request.GET), contact_render)
    api_key = authenticate(request, ApiScope.CONTACTS)
    data = json_body(request, limit=settings.API_CONTACTS_MAX_BODY_BYTES)
    items = contacts_request_parse(data)

    def create() -> tuple[int, dict[str, Any]]:
        result = contacts_upsert(items)
        # "opted_in": false is an opt-out like any other: its pending campaign rows skipped.
        contacts_stop(
            contact_ids=result.opted_out_ids, at=timezone.now(), reason=API_OPT_OUT_REASON
        )
        return 201, result.as_dict()

    return create_answer(
        request, api_key=api_key, operation="contacts.upsert", data=data, create=create
    )


@api_view("GET", "DELETE")
def contact(request: HttpRequest, contact_id: int) -> HttpResponse:
    if request.method == "GET":
        authenticate(request, *READ)
        return JsonResponse(contact_render(contact_get(contact_id)))
    authenticate(request, ApiScope.CONTACTS)
    try:
        erased = contact_erase(contact_id=contact_id)
    except ContactNotFound:
        raise ApiProblem(404, "not_found", "No such contact.") from None
    return JsonResponse(erased.as_dict())


@api_view("POST")
def contact_opt_out(request: HttpRequest, contact_id: int) -> HttpResponse:
    authenticate(request, ApiScope.CONTACTS)
    found = contact_get(contact_id)
    with transaction.atomic():  # the opt-out and its skipped rows, together
        contacts_stop(contact_ids=[found.pk], at=timezone.now(), reason=API_OPT_OUT_REASON)
    return JsonResponse(contact_render(contact_get(contact_id)))


@api_view("POST")
def contact_opt_in(request: HttpRequest, contact_id: int) -> HttpResponse:
    authenticate(request, ApiScope.CONTACTS)
    found = contact_get(contact_id)
    contacts_resume(contact_ids=[found.pk], at=timezone.now())
    return JsonResponse(contact_render(contact_get(contact_id)))


@api_view("GET", "POST")
def lists(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        authenticate(request, *READ)
        return page_answer(request, lists_counted(), list_render)
    api_key = authenticate(request, ApiScope.CONTACTS)
    data = json_body(request)
    parsed = list_request_parse(data)
    return create_answer(
        request,
        api_key=api_key,
        operation="lists.create",
        data=data,
        create=lambda: (201, list_create(parsed)),
    )


@api_view("GET", "POST")
def segments(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        authenticate(request, *READ)
        return page_answer(request, segments_listed(), segment_render)
    api_key = authenticate(request, ApiScope.CONTACTS)
    data = json_body(request)
    parsed = segment_request_parse(data)
    return create_answer(
        request,
        api_key=api_key,
        operation="segments.create",
        data=data,
        create=lambda: (201, segment_create(parsed)),
    )


@api_view("GET")
def segment_count_view(request: HttpRequest, segment_id: int) -> HttpResponse:
    authenticate(request, *READ)
    return JsonResponse(segment_count(segment_id))


@api_view("GET")
def templates(request: HttpRequest) -> HttpResponse:
    api_key = authenticate(request, *READ)
    return page_answer(request, templates_filtered(request.GET, api_key), template_render)


@api_view("GET")
def template(request: HttpRequest, template_id: int) -> HttpResponse:
    api_key = authenticate(request, *READ)
    return JsonResponse(template_render(template_get(template_id, api_key), components=True))


urlpatterns: list[URLPattern] = [
    path("contacts", contacts, name="contacts"),
    path("contacts/<int:contact_id>", contact, name="contact"),
    path("contacts/<int:contact_id>/opt-out", contact_opt_out, name="contact_opt_out"),
    path("contacts/<int:contact_id>/opt-in", contact_opt_in, name="contact_opt_in"),
    path("lists", lists, name="lists"),
    path("segments", segments, name="segments"),
    path("segments/<int:segment_id>/count", segment_count_view, name="segment_count"),
    path("templates", templates, name="templates"),
    path("templates/<int:template_id>", template, name="template"),
]
