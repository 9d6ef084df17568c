"""The Cloud API client: one pooled HTTP session per process, typed results, no database.

``send`` posts one message to ``{base}/{version}/{phone_number_id}/messages`` (or, for a
marketing template through the Marketing Messages API, ``/marketing_messages``) and returns
``Accepted`` or ``ApiError``; it never raises for HTTP or network trouble. ``ApiError`` says
whether the request may have reached Meta: a refused connection, a DNS failure or a connect
timeout means the bytes never left (safe to resend); a read timeout or a reset after the
request was written means Meta may have accepted it (reconcile, never resend blindly).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import requests
import urllib3.exceptions
from django.conf import settings
from requests.adapters import HTTPAdapter

from whatsblast.core.secrets import Secret
from whatsblast.core.template_values import offer_expiry_ms, sku_list

# Pooled connections per host; also the ceiling of ``send_batch`` concurrency.
DEFAULT_POOL_SIZE = 256
MAX_CALLBACK_DATA = 512
MAX_ERROR_TEXT = 1000
# A business-scoped user id (BSUID): the user's two-letter country, a dot, ``ENT.`` for a
# parent (portfolio) id, then letters and digits: ``US.13491208655302741918``. Never a
# phone, which is all digits with an optional ``+``.
USER_ID_RE = re.compile(r"^[A-Z]{2}\.(?:ENT\.)?[A-Za-z0-9]+$")


def is_user_id(recipient: str) -> bool:
    """True when a send's recipient is a business-scoped user id rather than a phone."""
    return USER_ID_RE.match(recipient) is not None


def bearer(token: Secret | str) -> str:
    """The ``Authorization`` header value: the one place a token is revealed."""
    return f"Bearer {token.reveal() if isinstance(token, Secret) else token}"


@dataclass(frozen=True)
class SendRequest:
    base_url: str
    phone_number_id: str
    access_token: Secret | str
    to: str
    callback_data: str
    template_name: str | None = None
    language: str | None = None
    params: dict[str, Any] | None = None
    text: str | None = None
    # With ``text``: up to three reply buttons, (id, title) each, sent as an interactive
    # message (only inside the customer-service window, as any free-form message).
    buttons: tuple[tuple[str, str], ...] = ()
    # MESSAGES, or MARKETING_MESSAGES (the Marketing Messages API, templates only) with its
    # product_policy ("" leaves Meta's default) and message_activity_sharing (None: the
    # WABA's setting).
    endpoint: str = "messages"
    product_policy: str = ""
    activity_sharing: bool | None = None


MESSAGES = "messages"
MARKETING_MESSAGES = "marketing_messages"


def send_url(req: SendRequest, api_version: str) -> str:
    """``{base}/{version}/{phone_number_id}/messages`` (or ``/marketing_messages``)."""
    endpoint = MARKETING_MESSAGES if req.endpoint == MARKETING_MESSAGES else MESSAGES
    return f"{req.base_url.rstrip('/')}/{api_version}/{req.phone_number_id}/{endpoint}"


# ``messages[].message_status`` of a send Meta accepted but holds: template pacing (a new,
# unpaused or not-GREEN template) or business portfolio pacing. The message is delivered
# later, or dropped with a ``failed`` status webhook, code 132015, if Meta pauses the
# template (Meta, "Template pacing", Updated 2025-12-08). Meta's other values: ``accepted``,
# and ``paused`` in the OpenAPI enum; the field may be absent (docs/cloud-api.md, 1.2).
HELD_FOR_QUALITY_ASSESSMENT = "held_for_quality_assessment"


@dataclass(frozen=True)
class Accepted:
    wamid: str
    wa_id: str
    message_status: str | None
    latency_s: float

    @property
    def held_for_quality_assessment(self) -> bool:
        """Meta accepted the send but holds it while it assesses the template's quality."""
        return self.message_status == HELD_FOR_QUALITY_ASSESSMENT


@dataclass(frozen=True)
class ApiError:
    http_status: int | None
    code: int | None
    subcode: int | None
    title: str
    details: str
    retry_after_s: float | None
    may_have_reached_meta: bool
    latency_s: float
    fbtrace_id: str = ""
    is_transient: bool | None = None


SendResult = Accepted | ApiError

# The template catalogue (delivery.cloud.template_sync): what GET message_templates asks for.
TEMPLATE_FIELDS = (
    "name,language,status,category,components,id,"
    "parameter_format,rejected_reason,quality_score,previous_category,"
    "message_send_ttl_seconds"
)
# What GET /{phone_number_id} and GET /{waba_id} are asked for (delivery.graph_reads).
# The portfolio's messaging limit is ``whatsapp_business_manager_messaging_limit`` from
# v24.0 on and ``messaging_limit_tier`` (deprecated) up to v23.0, both a string such as
# "TIER_250" (Meta, "Messaging limits": "request the whatsapp_business_manager_messaging_limit
# field (for v24.0 and newer) or messaging_limit_tier field (for 23.0 and older)", Updated
# 2025-11-26, example at v24.0; the page Updated 2026-05-08 gives the same answer at v25.0;
# developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits).
MESSAGING_LIMIT_FIELD = "whatsapp_business_manager_messaging_limit"
MESSAGING_LIMIT_FIELD_V23 = "messaging_limit_tier"
_NUMBER_FIELDS = (
    "id,display_phone_number,verified_name,quality_rating,{limit},throughput,name_status,status"
)


def number_fields(api_version: str) -> str:
    """The fields GET /{phone_number_id} asks for at ``api_version`` ("v23.0", "v25.0")."""
    match = re.fullmatch(r"v?(\d+)(?:\.\d+)?", api_version.strip())
    old = match is not None and int(match.group(1)) <= 23
    return _NUMBER_FIELDS.format(limit=MESSAGING_LIMIT_FIELD_V23 if old else MESSAGING_LIMIT_FIELD)


ACCOUNT_FIELDS = (
    "id,name,account_review_status,business_verification_status,"
    "marketing_messages_onboarding_status"
)


@dataclass(frozen=True)
class GraphNode:
    """A Graph object as read (a phone number, a WABA)."""

    data: dict[str, Any]
    latency_s: float


@dataclass(frozen=True)
class TemplatePage:
    """One page of ``GET /{waba_id}/message_templates``; ``after`` is None on the last."""

    templates: list[dict[str, Any]]
    after: str | None
    latency_s: float


# --- request body ------------------------------------------------------------------------------


def build_message_body(req: SendRequest) -> dict[str, Any]:
    """Meta's JSON for a template send (or a free-form text send when ``text`` is set)."""
    if len(req.callback_data) > MAX_CALLBACK_DATA:
        raise ValueError("callback_data exceeds Meta's 512-character limit")
    body: dict[str, Any] = {"messaging_product": "whatsapp", "recipient_type": "individual"}
    # Since 2026 a user who hides their number behind a username is reached by their user id
    # in ``recipient``; ``to`` stays for phones (Meta: when both are given, ``to`` wins, and
    # a template Meta will not send to a user id is refused with 131062).
    body["recipient" if is_user_id(req.to) else "to"] = req.to
    if req.template_name:
        template: dict[str, Any] = {
            "name": req.template_name,
            "language": {"policy": "deterministic", "code": req.language or "en_US"},
        }
        components = build_components(req.params or {})
        if components:
            template["components"] = components
        body["type"] = "template"
        body["template"] = template
    elif req.text is not None and req.buttons:
        body["type"] = "interactive"
        body["interactive"] = {
            "type": "button",
            "body": {"text": req.text},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": button_id, "title": title}}
                    for button_id, title in req.buttons
                ]
            },
        }
    elif req.text is not None:
        body["type"] = "text"
        body["text"] = {"preview_url": False, "body": req.text}
    else:
        raise ValueError("a send needs a template_name or a text")
    if req.callback_data:
        body["biz_opaque_callback_data"] = req.callback_data
    if req.endpoint == MARKETING_MESSAGES:
        if req.product_policy:
            body["product_policy"] = req.product_policy
        if req.activity_sharing is not None:
            body["message_activity_sharing"] = req.activity_sharing
    return body


def build_components(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Our params as Meta's template ``components`` list.

    Header, body, a limited-time offer's expiry, a carousel's cards (each with its own
    header, body and buttons) and the buttons, in the order Meta's examples give them.
    """
    components = _part_components(params, buttons=False)
    offer = params.get("offer")
    if offer:
        expires = offer_expiry_ms(str(offer["expires"]))
        if expires is None:
            raise ValueError(f"offer expiry {offer['expires']!r} is not a date and time")
        components.append(
            {
                "type": "limited_time_offer",
                "parameters": [
                    {
                        "type": "limited_time_offer",
                        "limited_time_offer": {"expiration_time_ms": expires},
                    }
                ],
            }
        )
    cards = params.get("cards")
    if cards:
        components.append(
            {
                "type": "carousel",
                "cards": [
                    {"card_index": index, "components": _part_components(card, buttons=True)}
                    for index, card in enumerate(cards)
                ],
            }
        )
    for button in params.get("buttons") or ():
        components.append(_button_component(button))
    return components


def _part_components(params: dict[str, Any], *, buttons: bool) -> list[dict[str, Any]]:
    components: list[dict[str, Any]] = []
    header = params.get("header")
    if header:
        # One header parameter as a dict; a list of them is accepted too.
        headers = header if isinstance(header, list) else [header]
        components.append({"type": "header", "parameters": [_header_parameter(h) for h in headers]})
    body = params.get("body")
    if body:
        components.append({"type": "body", "parameters": _body_parameters(body)})
    if buttons:
        components.extend(_button_component(button) for button in params.get("buttons") or ())
    return components


def _header_parameter(header: dict[str, Any]) -> dict[str, Any]:
    kind = header.get("type", "text")
    value = str(header["value"])
    if kind == "text":
        parameter = {"type": "text", "text": value}
        if header.get("name"):  # a named header placeholder
            parameter["parameter_name"] = str(header["name"])
        return parameter
    if kind == "product":
        return {
            "type": "product",
            "product": {
                "product_retailer_id": value,
                "catalog_id": str(header.get("catalog_id") or ""),
            },
        }
    if kind not in ("image", "video", "document"):
        raise ValueError(f"unsupported header type {kind!r}")
    # An all-digit value is a media id from Meta's upload endpoint; anything else a link.
    media = {"id": value} if value.isdigit() else {"link": value}
    return {"type": kind, kind: media}


def _body_parameters(body: list[Any] | dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(body, dict):
        return [
            {"type": "text", "parameter_name": name, "text": str(value)}
            for name, value in body.items()
        ]
    return [{"type": "text", "text": str(value)} for value in body]


def _button_component(button: dict[str, Any]) -> dict[str, Any]:
    sub_type = button["sub_type"]
    value = str(button["value"])
    parameter: dict[str, Any]
    if sub_type == "quick_reply":
        parameter = {"type": "payload", "payload": value}
    elif sub_type == "url":
        parameter = {"type": "text", "text": value}
    elif sub_type == "copy_code":
        parameter = {"type": "coupon_code", "coupon_code": value}
    elif sub_type == "flow":
        parameter = {"type": "action", "action": {"flow_token": value}}
    elif sub_type == "catalog":
        parameter = {"type": "action", "action": {"thumbnail_product_retailer_id": value}}
    elif sub_type == "mpm":
        sections = [
            {
                "title": str(section["title"]),
                "product_items": [
                    {"product_retailer_id": sku} for sku in sku_list(str(section["items"]))
                ],
            }
            for section in button.get("sections") or ()
        ]
        parameter = {
            "type": "action",
            "action": {"thumbnail_product_retailer_id": value, "sections": sections},
        }
    else:
        raise ValueError(f"unsupported button sub_type {sub_type!r}")
    # Meta's examples send the index as a string.
    return {
        "type": "button",
        "sub_type": sub_type,
        "index": str(button.get("index", 0)),
        "parameters": [parameter],
    }


# --- response parsing --------------------------------------------------------------------------


def parse_response(
    *, status: int, body: bytes, headers: dict[str, str] | Any, latency_s: float
) -> SendResult:
    """A Graph API HTTP response as ``Accepted`` or ``ApiError`` (never raises)."""
    data = _json_or_none(body)
    if 200 <= status < 300 and isinstance(data, dict):
        try:
            message = data["messages"][0]
            contact = (data.get("contacts") or [{}])[0]
            return Accepted(
                wamid=str(message["id"]),
                # A send to a user id is answered with ``user_id`` and no ``wa_id``.
                wa_id=str(contact.get("wa_id") or ""),
                message_status=_str_or_none(message.get("message_status")),
                latency_s=latency_s,
            )
        except (KeyError, IndexError, TypeError):
            pass
    retry_after = parse_retry_after(headers.get("Retry-After"))
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        text = body[:MAX_ERROR_TEXT].decode("utf-8", "replace")
        title = "Unexpected success body" if 200 <= status < 300 else f"HTTP {status}"
        return ApiError(
            http_status=status,
            code=None,
            subcode=None,
            title=title,
            details=text,
            retry_after_s=retry_after,
            may_have_reached_meta=True,
            latency_s=latency_s,
        )
    return _graph_error(error, status=status, retry_after=retry_after, latency_s=latency_s)


def _graph_error(
    error: dict[str, Any], *, status: int, retry_after: float | None, latency_s: float
) -> ApiError:
    error_data = error.get("error_data")
    details = ""
    if isinstance(error_data, dict):
        details = str(error_data.get("details") or "")
    elif isinstance(error_data, str):
        details = error_data
    details = details or str(error.get("error_user_msg") or "")
    title = str(error.get("error_user_title") or error.get("message") or error.get("title") or "")
    transient = error.get("is_transient")
    return ApiError(
        http_status=status,
        code=_int_or_none(error.get("code")),
        subcode=_int_or_none(error.get("error_subcode")),
        title=title[:MAX_ERROR_TEXT],
        details=details[:MAX_ERROR_TEXT],
        retry_after_s=retry_after,
        may_have_reached_meta=True,
        latency_s=latency_s,
        fbtrace_id=str(error.get("fbtrace_id") or ""),
        is_transient=transient if isinstance(transient, bool) else None,
    )


def parse_template_page(
    *, status: int, body: bytes, headers: dict[str, str] | Any, latency_s: float
) -> TemplatePage | ApiError:
    """A template listing page, or the error Graph answered with (never raises)."""
    data = _json_or_none(body)
    if 200 <= status < 300 and isinstance(data, dict) and isinstance(data.get("data"), list):
        paging = data["paging"] if isinstance(data.get("paging"), dict) else {}
        cursors = paging["cursors"] if isinstance(paging.get("cursors"), dict) else {}
        # Graph gives a cursor on every page but a ``next`` link only when more follow.
        after = cursors.get("after") if paging.get("next") else None
        templates = [t for t in data["data"] if isinstance(t, dict)]
        return TemplatePage(templates=templates, after=after or None, latency_s=latency_s)
    return _graph_failure(
        data, status=status, body=body, headers=headers, latency_s=latency_s,
        expected="a template listing",
    )  # fmt: skip


def parse_graph_node(
    *, status: int, body: bytes, headers: dict[str, str] | Any, latency_s: float
) -> GraphNode | ApiError:
    """A Graph object, or the error Graph answered with (never raises)."""
    data = _json_or_none(body)
    if 200 <= status < 300 and isinstance(data, dict) and "error" not in data:
        return GraphNode(data=data, latency_s=latency_s)
    return _graph_failure(
        data, status=status, body=body, headers=headers, latency_s=latency_s,
        expected="a Graph object",
    )  # fmt: skip


def _graph_failure(
    data: Any,
    *,
    status: int,
    body: bytes,
    headers: dict[str, str] | Any,
    latency_s: float,
    expected: str,
) -> ApiError:
    """The error of a Graph read: Graph's own error object, or a body that is not ``expected``."""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        retry_after = parse_retry_after(headers.get("Retry-After"))
        return _graph_error(
            data["error"], status=status, retry_after=retry_after, latency_s=latency_s
        )
    return ApiError(
        http_status=status,
        code=None,
        subcode=None,
        title=f"HTTP {status}: not {expected}",
        details=body[:MAX_ERROR_TEXT].decode("utf-8", "replace"),
        retry_after_s=None,
        may_have_reached_meta=True,
        latency_s=latency_s,
    )


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _str_or_none(value: Any) -> str | None:
    """A field Meta documents as a string, or None when absent or of another type."""
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def network_error(exc: requests.RequestException, *, latency_s: float) -> ApiError:
    """A transport failure, tagged with whether the request could have been written."""
    reached = may_have_reached_meta(exc)
    return ApiError(
        http_status=None,
        code=None,
        subcode=None,
        title=type(exc).__name__,
        details=str(exc)[:MAX_ERROR_TEXT],
        retry_after_s=None,
        may_have_reached_meta=reached,
        latency_s=latency_s,
    )


def invalid_request(exc: Exception) -> ApiError:
    """A request that cannot be built (bad params, callback data too long), never sent.

    Reported as Meta's own answer to a malformed request, code 100 (Invalid parameter), so
    it classifies the same way: a payload problem shared by the whole campaign.
    """
    return ApiError(
        http_status=None,
        code=100,
        subcode=None,
        title="(#100) Invalid parameter",
        details=f"not sent: {exc}"[:MAX_ERROR_TEXT],
        retry_after_s=None,
        may_have_reached_meta=False,
        latency_s=0.0,
    )


def may_have_reached_meta(exc: BaseException) -> bool:
    """False only when the connection was never established, so no byte was sent.

    A connect timeout, a refused connection, a DNS failure and a failed TLS handshake all
    happen before the request is written. Anything after that (read timeout, reset while
    waiting for the answer, a broken response) may come after Meta accepted the message.
    """
    if isinstance(exc, requests.ConnectTimeout | requests.exceptions.SSLError):
        return False
    if isinstance(exc, requests.ConnectionError):
        reason = exc.args[0] if exc.args else None
        if isinstance(reason, urllib3.exceptions.MaxRetryError):
            reason = reason.reason
        if isinstance(
            reason,
            urllib3.exceptions.NewConnectionError
            | urllib3.exceptions.NameResolutionError
            | urllib3.exceptions.ConnectTimeoutError,
        ):
            return False
    return True


# --- the client --------------------------------------------------------------------------------


class CloudApiClient:
    """Sends messages over one pooled ``requests.Session``; safe to share between threads."""

    def __init__(
        self,
        *,
        api_version: str,
        connect_timeout: float,
        read_timeout: float,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.api_version = api_version
        self.timeout = (connect_timeout, read_timeout)
        self.pool_size = pool_size
        self.session = requests.Session()
        # max_retries=0: a request is never silently repeated, which could send twice.
        adapter = HTTPAdapter(pool_connections=8, pool_maxsize=pool_size, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def url_for(self, req: SendRequest) -> str:
        return send_url(req, self.api_version)

    def send(self, req: SendRequest) -> SendResult:
        try:
            data = json.dumps(build_message_body(req), separators=(",", ":")).encode()
        except (KeyError, TypeError, ValueError) as exc:
            return invalid_request(exc)
        headers = {
            "Authorization": bearer(req.access_token),
            "Content-Type": "application/json",
        }
        started = time.perf_counter()
        try:
            response = self.session.post(
                self.url_for(req), data=data, headers=headers, timeout=self.timeout
            )
            body = response.content
        except requests.RequestException as exc:
            return network_error(exc, latency_s=time.perf_counter() - started)
        return parse_response(
            status=response.status_code,
            body=body,
            headers=response.headers,
            latency_s=time.perf_counter() - started,
        )

    def send_batch(self, reqs: Sequence[SendRequest], *, concurrency: int) -> list[SendResult]:
        """Send concurrently, at most ``concurrency`` in flight; results in input order."""
        if not reqs:
            return []
        concurrency = max(1, min(concurrency, self.pool_size, len(reqs)))
        if concurrency == 1:
            return [self.send(req) for req in reqs]
        executor = self._get_executor()
        gate = threading.BoundedSemaphore(concurrency)
        futures: list[Future[SendResult]] = []
        for req in reqs:
            gate.acquire()
            future = executor.submit(self.send, req)
            future.add_done_callback(lambda _f: gate.release())
            futures.append(future)
        return [future.result() for future in futures]

    def list_templates(
        self,
        *,
        base_url: str,
        waba_id: str,
        access_token: Secret | str,
        after: str | None = None,
        limit: int = 100,
    ) -> TemplatePage | ApiError:
        """One page of the WABA's templates (a management call: Meta allows 200-5,000/h)."""
        url = f"{base_url.rstrip('/')}/{self.api_version}/{waba_id}/message_templates"
        query = {"fields": TEMPLATE_FIELDS, "limit": str(limit)}
        if after:
            query["after"] = after
        started = time.perf_counter()
        try:
            response = self.session.get(
                url,
                params=query,
                headers={"Authorization": bearer(access_token)},
                timeout=self.timeout,
            )
            body = response.content
        except requests.RequestException as exc:
            return network_error(exc, latency_s=time.perf_counter() - started)
        return parse_template_page(
            status=response.status_code,
            body=body,
            headers=response.headers,
            latency_s=time.perf_counter() - started,
        )

    def get_node(
        self, *, base_url: str, node_id: str, access_token: Secret | str, fields: str
    ) -> GraphNode | ApiError:
        """``GET /{node_id}?fields=…`` (a management call, like the template listing)."""
        return self._node_call("GET", base_url, node_id, access_token, params={"fields": fields})

    def post_node(
        self, *, base_url: str, node_id: str, access_token: Secret | str, data: dict[str, Any]
    ) -> GraphNode | ApiError:
        """``POST /{node_id}`` with a JSON body (a template's settings, a WABA's switch)."""
        return self._node_call("POST", base_url, node_id, access_token, json=data)

    def _node_call(
        self, method: str, base_url: str, node_id: str, access_token: Secret | str, **kwargs: Any
    ) -> GraphNode | ApiError:
        url = f"{base_url.rstrip('/')}/{self.api_version}/{node_id}"
        started = time.perf_counter()
        try:
            response = self.session.request(
                method,
                url,
                headers={"Authorization": bearer(access_token)},
                timeout=self.timeout,
                **kwargs,
            )
            body = response.content
        except requests.RequestException as exc:
            return network_error(exc, latency_s=time.perf_counter() - started)
        return parse_graph_node(
            status=response.status_code,
            body=body,
            headers=response.headers,
            latency_s=time.perf_counter() - started,
        )

    def _get_executor(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.pool_size, thread_name_prefix="cloud-api"
                )
            return self._executor

    def close(self) -> None:
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
        self.session.close()


_client: CloudApiClient | None = None
_client_pid = 0
_client_lock = threading.Lock()


def get_client() -> CloudApiClient:
    """The process's client, built from settings on first use.

    A forked child (RQ's default worker forks per job) builds its own: pooled sockets
    inherited from the parent would be shared by two processes.
    """
    global _client, _client_pid
    with _client_lock:
        if _client is None or _client_pid != os.getpid():
            _client_pid = os.getpid()
            _client = CloudApiClient(
                api_version=settings.WHATSAPP_API_VERSION,
                connect_timeout=settings.WHATSAPP_CONNECT_TIMEOUT,
                read_timeout=settings.WHATSAPP_READ_TIMEOUT,
                pool_size=getattr(settings, "WHATSAPP_CLIENT_POOL_SIZE", DEFAULT_POOL_SIZE),
            )
        return _client
