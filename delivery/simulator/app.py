"""The simulator over HTTP: Graph API routes plus the ``/_sim/...`` control API.

Graph API:
    POST /{version}/{phone_number_id}/messages        the send endpoint
    GET  /{version}/{waba_id}/message_templates       ?limit=&after= (Graph paging)
    GET  /{version}/{waba_id}/template_analytics      ?start=&end=&granularity=DAILY&
         template_ids=[…]&metric_types=…&product_type=…: Meta's daily counts per template,
         from what was sent, delivered, read, tapped and clicked (delivery.simulator.analytics)
    GET  /{version}/{phone_number_id}                 the number: quality, limit, throughput
    GET  /{version}/{waba_id}                         the account: review status
Control (JSON in and out):
    GET  /_sim/health | /_sim/config | /_sim/stats
    GET  /_sim/records?after=SEQ&limit=N&bodies=1     compact rows, raw bodies when kept
    GET  /_sim/histogram?phone_number_id=ID           {"<epoch second>": accepted sends}
    GET  /_sim/duplicates                             {number: {recipient: accepted > 1}}
    GET  /_sim/webhooks/idle?timeout=S                waits for status webhooks to settle
    POST /_sim/config {knob: value}                   see SimConfig
    POST /_sim/reset {"numbers": bool, "templates": bool}
    POST /_sim/numbers {"numbers": [NumberSpec fields]}
    POST /_sim/templates {"templates": [TemplateSpec fields or the shorthand]}
    POST /_sim/events {"kind": KIND, ...fields}       a callback Meta sends on its own:
         template_status {name, language, event, reason?}, template_category {name,
         language, new_category}, template_quality {name, language, new_quality_score},
         account_update {event, phone_number_id? | waba_id?, restriction_info?, ...},
         user_changed_number {phone_number_id, old, new}, user_changed_user_id
         {phone_number_id, old_user_id, new_user_id, phone?}, button_reply {wamid, text,
         payload?} (a quick-reply tap answering that send), link_click {phone_number_id,
         wamid?, button?, ...} (a Marketing Messages API click); answers the body posted
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from delivery.simulator import errors
from delivery.simulator.analytics import AnalyticsQueryError, analytics_query
from delivery.simulator.core import Simulator

SIMULATOR_KEY = web.AppKey("simulator", Simulator)
_JSON = "application/json"


def build_app(simulator: Simulator) -> web.Application:
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app[SIMULATOR_KEY] = simulator
    app.router.add_post("/{version}/{phone_number_id}/messages", send)
    app.router.add_post("/{version}/{phone_number_id}/marketing_messages", send)
    app.router.add_get("/{version}/{waba_id}/message_templates", message_templates)
    app.router.add_get("/{version}/{waba_id}/template_analytics", template_analytics)
    app.router.add_get("/_sim/health", health)
    app.router.add_get("/_sim/config", config_get)
    app.router.add_post("/_sim/config", config_post)
    app.router.add_post("/_sim/reset", reset)
    app.router.add_post("/_sim/numbers", numbers_post)
    app.router.add_post("/_sim/templates", templates_post)
    app.router.add_post("/_sim/events", events_post)
    app.router.add_get("/_sim/stats", stats)
    app.router.add_get("/_sim/records", records)
    app.router.add_get("/_sim/histogram", histogram)
    app.router.add_get("/_sim/duplicates", duplicates)
    app.router.add_get("/_sim/webhooks/idle", webhooks_idle)
    # Last: any other two-part path is a Graph node.
    app.router.add_get("/{version}/{node_id}", graph_node)
    app.router.add_post("/{version}/{node_id}", graph_node_post)
    app.on_startup.append(_start_webhooks)
    app.on_cleanup.append(_stop_webhooks)
    return app


async def _start_webhooks(app: web.Application) -> None:
    await app[SIMULATOR_KEY].webhooks.start()


async def _stop_webhooks(app: web.Application) -> None:
    await app[SIMULATOR_KEY].webhooks.stop()


# --- Graph API ---------------------------------------------------------------------------------


async def send(request: web.Request) -> web.Response:
    simulator = request.app[SIMULATOR_KEY]
    raw = await request.read()
    reply = simulator.handle_send(
        phone_number_id=request.match_info["phone_number_id"],
        authorization=request.headers.get("Authorization", ""),
        raw=raw,
        endpoint=request.path.rsplit("/", 1)[-1],
    )
    if reply.delay_s > 0:
        simulator.in_flight += 1
        try:
            await asyncio.sleep(reply.delay_s)
        finally:
            simulator.in_flight -= 1
    return web.Response(status=reply.status, body=reply.body, content_type=_JSON)


async def message_templates(request: web.Request) -> web.Response:
    """Templates of a WABA, paged like Graph: ``limit``, ``after`` and ``paging.next``."""
    simulator = request.app[SIMULATOR_KEY]
    waba_id = request.match_info["waba_id"]
    if not request.headers.get("Authorization", "").lower().startswith("bearer "):
        status, body = errors.auth_error()
        return web.Response(status=status, body=body, content_type=_JSON)
    templates = simulator.templates_for(waba_id)
    limit = max(1, min(int(request.query.get("limit", "25")), 1000))
    start = _cursor_index(request.query.get("after"))
    page = templates[start : start + limit]
    data: dict[str, Any] = {"data": [t.as_graph() for t in page]}
    if page:
        after = _cursor(start + len(page))
        data["paging"] = {"cursors": {"before": _cursor(start), "after": after}}
        if start + len(page) < len(templates):
            next_url = request.url.update_query({"limit": str(limit), "after": after})
            data["paging"]["next"] = str(next_url)
    return web.json_response(data)


async def template_analytics(request: web.Request) -> web.Response:
    """Meta's template analytics of a WABA: a token of one of its numbers is required."""
    simulator = request.app[SIMULATOR_KEY]
    waba_id = request.match_info["waba_id"]
    authorization = request.headers.get("Authorization", "")
    token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
    tokens = {
        n.access_token
        for n in simulator.numbers.values()
        if (n.waba_id or simulator.config.waba_id) == waba_id
    }
    if not token or (tokens and token not in tokens):
        status, body = errors.auth_error()
        return web.Response(status=status, body=body, content_type=_JSON)
    try:
        query = analytics_query(dict(request.query))
    except AnalyticsQueryError as exc:
        status, body = errors.graph_error(100, str(exc))
        return web.Response(status=status, body=body, content_type=_JSON)
    return web.json_response(simulator.template_analytics(query))


async def graph_node(request: web.Request) -> web.Response:
    """``GET /{phone_number_id}`` or ``GET /{waba_id}``: the fields whatsblast reads."""
    simulator = request.app[SIMULATOR_KEY]
    node_id = request.match_info["node_id"]
    if request.match_info["version"].startswith("_"):
        raise web.HTTPNotFound()
    authorization = request.headers.get("Authorization", "")
    token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
    number = simulator.numbers.get(node_id)
    if not token or (number is not None and token != number.access_token):
        status, body = errors.auth_error()
        return web.Response(status=status, body=body, content_type=_JSON)
    if number is not None:
        data = number.as_graph(request.match_info["version"])
    elif node_id == simulator.config.waba_id or any(
        n.waba_id == node_id for n in simulator.numbers.values()
    ):
        data = {
            "id": node_id,
            "name": "Simulated WABA",
            "account_review_status": "APPROVED",
            "business_verification_status": "verified",
            "marketing_messages_onboarding_status": simulator.config.mm_onboarding_status,
        }
    else:
        status, body = errors.unknown_object_error(node_id)
        return web.Response(status=status, body=body, content_type=_JSON)
    fields = request.query.get("fields")
    if fields:
        wanted = {f.strip() for f in fields.split(",")} | {"id"}
        data = {k: v for k, v in data.items() if k in wanted}
    return web.json_response(data)


async def graph_node_post(request: web.Request) -> web.Response:
    """``POST /{template_id}`` with ``message_send_ttl_seconds`` (Meta's ranges by category),
    or ``POST /{waba_id}`` with ``disable_marketing_messages_on_cloud_api``."""
    simulator = request.app[SIMULATOR_KEY]
    node_id = request.match_info["node_id"]
    if request.match_info["version"].startswith("_"):
        raise web.HTTPNotFound()
    data = await _body(request)
    template = next((t for t in simulator.templates.values() if t.id == node_id), None)
    if template is not None and "message_send_ttl_seconds" in data:
        seconds = data["message_send_ttl_seconds"]
        low, high = TTL_RANGES.get(template.category.upper(), (30, 2_592_000))
        if not isinstance(seconds, int) or not low <= seconds <= high:
            status, body = errors.graph_error(100, f"message_send_ttl_seconds: {low} to {high}")
            return web.Response(status=status, body=body, content_type=_JSON)
        template.message_send_ttl_seconds = seconds
        return web.json_response({"success": True})
    if "disable_marketing_messages_on_cloud_api" in data:
        simulator.configure(
            {
                "marketing_disabled_on_cloud_api": bool(
                    data["disable_marketing_messages_on_cloud_api"]
                )
            }
        )
        return web.json_response({"success": True})
    status, body = errors.unknown_object_error(node_id)
    return web.Response(status=status, body=body, content_type=_JSON)


# Meta's message_send_ttl_seconds ranges by template category.
TTL_RANGES = {
    "MARKETING": (43_200, 2_592_000),
    "UTILITY": (30, 43_200),
    "AUTHENTICATION": (30, 900),
}


def _cursor(index: int) -> str:
    return format(index, "x").rjust(8, "0").encode().hex()


def _cursor_index(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(bytes.fromhex(cursor).decode(), 16)
    except ValueError:
        return 0


# --- control API -------------------------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def config_get(request: web.Request) -> web.Response:
    return web.json_response(request.app[SIMULATOR_KEY].config.as_dict())


async def config_post(request: web.Request) -> web.Response:
    changes = await _body(request)
    try:
        return web.json_response(request.app[SIMULATOR_KEY].configure(changes))
    except (TypeError, ValueError) as exc:
        return web.json_response({"error": str(exc)}, status=400)


async def reset(request: web.Request) -> web.Response:
    options = await _body(request)
    request.app[SIMULATOR_KEY].reset(
        numbers=bool(options.get("numbers")), templates=bool(options.get("templates"))
    )
    return web.json_response({"ok": True})


async def numbers_post(request: web.Request) -> web.Response:
    data = await _body(request)
    items = data.get("numbers", [data])
    try:
        specs = [request.app[SIMULATOR_KEY].add_number(item) for item in items]
    except (TypeError, ValueError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response({"numbers": [s.phone_number_id for s in specs]})


async def templates_post(request: web.Request) -> web.Response:
    data = await _body(request)
    items = data.get("templates", [data])
    try:
        specs = [request.app[SIMULATOR_KEY].add_template(item) for item in items]
    except (KeyError, TypeError, ValueError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response({"templates": [s.as_graph() for s in specs]})


async def events_post(request: web.Request) -> web.Response:
    data = await _body(request)
    kind = str(data.pop("kind", ""))
    try:
        posted = request.app[SIMULATOR_KEY].event_post(kind, data)
    except (KeyError, TypeError, ValueError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response({"posted": posted})


async def stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[SIMULATOR_KEY].stats())


async def records(request: web.Request) -> web.Response:
    query = request.query
    rows = request.app[SIMULATOR_KEY].recorder.rows_json(
        after=int(query.get("after", "0")),
        limit=int(query["limit"]) if "limit" in query else None,
        bodies=query.get("bodies", "") in ("1", "true"),
    )
    return web.json_response({"records": rows})


async def histogram(request: web.Request) -> web.Response:
    number = request.query.get("phone_number_id", "")
    return web.json_response(request.app[SIMULATOR_KEY].recorder.histogram(number))


async def duplicates(request: web.Request) -> web.Response:
    return web.json_response(request.app[SIMULATOR_KEY].recorder.accepted_per_recipient())


async def webhooks_idle(request: web.Request) -> web.Response:
    """Waits up to ``timeout`` seconds for every scheduled status to be delivered or dropped."""
    simulator = request.app[SIMULATOR_KEY]
    idle = await simulator.webhooks_idle(float(request.query.get("timeout", "10")))
    return web.json_response({"idle": idle, "webhooks": simulator.webhooks.stats()})


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw:
        return {}
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    return data
