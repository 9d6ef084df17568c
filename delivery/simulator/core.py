"""The simulator's state and its decision for each send request (no HTTP here)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from delivery.simulator import errors
from delivery.simulator.analytics import (
    CLOUD_API,
    MARKETING_MESSAGES,
    AnalyticsQuery,
    TemplateAnalytics,
)
from delivery.simulator.config import (
    NumberSpec,
    SimConfig,
    TemplateSpec,
    is_user_id,
    recipient_key,
)
from delivery.simulator.events import EventSources, event_build
from delivery.simulator.limits import PairLimiter, ReachWindow, TokenBucket
from delivery.simulator.records import (
    ACCEPTED,
    ACCEPTED_HELD,
    ACCEPTED_LATE_FAIL,
    Recorder,
)
from delivery.simulator.us_pause import us_marketing_failure
from delivery.simulator.validate import Invalid, check_shape, check_template
from delivery.simulator.webhooks import SentMessage, WebhookDispatcher

MESSAGES_ENDPOINT = "messages"
MARKETING_ENDPOINT = "marketing_messages"


@dataclass
class _Request:
    seq: int
    mono: float
    wall: float
    phone_number_id: str
    raw: bytes
    to: str = ""
    template: str | None = None
    callback: str | None = None
    template_id: str | None = None
    endpoint: str = ""


@dataclass
class Reply:
    """What to answer: status and body, after ``delay_s`` seconds."""

    status: int
    body: bytes
    delay_s: float
    outcome: str


class Simulator:
    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.config.check()
        # Faults are simulation, not security: a seedable generator keeps tests reproducible.
        self.rng = random.Random(self.config.seed)  # noqa: S311
        self.numbers: dict[str, NumberSpec] = {}
        self.templates: dict[tuple[str, str], TemplateSpec] = {}
        self.webhooks = WebhookDispatcher(self.config, self.rng)
        self._fresh_state()

    def _fresh_state(self) -> None:
        cfg = self.config
        self.recorder = Recorder(record_cap=cfg.record_cap, body_cap=cfg.body_cap)
        self.buckets: dict[str, TokenBucket] = {}
        self.pairs = PairLimiter()
        self.reach: dict[str, ReachWindow] = {}
        self.in_flight = 0
        self.over_limit = 0
        self.quality_held = 0
        self.endpoints: Counter[str] = Counter()
        self.analytics = TemplateAnalytics()

    # --- control ------------------------------------------------------------------------

    def configure(self, changes: dict[str, Any]) -> dict[str, Any]:
        self.config = self.config.updated(changes)
        if "seed" in changes:
            self.rng.seed(self.config.seed)
        self.webhooks.reconfigure(self.config)
        self.recorder.record_cap = self.config.record_cap
        return self.config.as_dict()

    def reset(self, *, numbers: bool = False, templates: bool = False) -> None:
        """Forget records, counts and limiter state (and registrations when asked)."""
        self._fresh_state()
        self.webhooks.reset_counts()
        if numbers:
            self.numbers.clear()
        if templates:
            self.templates.clear()

    def add_number(self, data: dict[str, Any]) -> NumberSpec:
        spec = NumberSpec.from_dict(data)
        self.numbers[spec.phone_number_id] = spec
        self.buckets.pop(spec.phone_number_id, None)
        return spec

    def add_template(self, data: dict[str, Any]) -> TemplateSpec:
        spec = TemplateSpec.from_dict(data)
        if not spec.id:
            spec.id = str(1_000_000_000_000_000 + len(self.templates) + 1)
        self.templates[(spec.name, spec.language)] = spec
        return spec

    def stats(self) -> dict[str, Any]:
        return {
            **self.recorder.stats(),
            "in_flight": self.in_flight,
            "messaging_limit_exceeded": self.over_limit,
            "held_for_quality_assessment": self.quality_held,
            "accepted_by_endpoint": dict(self.endpoints),
            "webhooks": self.webhooks.stats(),
            "numbers": sorted(self.numbers),
            "templates": len(self.templates),
        }

    async def webhooks_idle(self, timeout_s: float) -> bool:
        """True once no status is waiting to be delivered (or the timeout passed first)."""
        deadline = time.monotonic() + timeout_s
        while self.webhooks.pending > 0:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def event_post(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """Post a callback Meta sends on its own (``delivery.simulator.events``); returns
        the body posted. Raises ``EventError`` for an unknown kind, template or number.

        A ``button_reply`` (a quick-reply tap) or a ``link_click`` naming the ``wamid`` of a
        send is counted in that send's template analytics; the tap answers the send (its
        ``context``), the click, as Meta's, carries no wamid.
        """
        sent = self.recorder.accepted_row(str(data.get("wamid") or ""))
        if kind == "button_reply":
            if sent is None:
                raise ValueError(f"no accepted send {data.get('wamid')!r} to answer")
            data = {**data, "to": sent.to, "phone_number_id": sent.phone_number_id}
        sources = EventSources(self.templates, self.numbers, self.config.waba_id)
        payload = event_build(sources, kind, data).envelope()
        if not self.webhooks.post_now(payload):
            raise ValueError("no callback_url is configured")
        if sent is not None and sent.template_id:
            self._count_engagement(kind, data, sent)
        return payload

    def _count_engagement(self, kind: str, data: dict[str, Any], sent: Any) -> None:
        product, wall = _product(sent.endpoint), sent.wall
        template_id = str(sent.template_id)
        if kind == "button_reply":
            button = str(data.get("text") or "")
            self.analytics.tap(product=product, template_id=template_id, wall=wall, button=button)
        elif kind == "link_click":
            button = str(data.get("button") or self._url_button(template_id))
            self.analytics.url_click(
                product=product, template_id=template_id, wall=wall, button=button,
                wamid=str(data["wamid"]),
            )  # fmt: skip

    def _url_button(self, template_id: str) -> str:
        """The text of the template's first URL button ("" when it has none)."""
        template = next((t for t in self.templates.values() if t.id == template_id), None)
        for component in template.components if template is not None else []:
            if str(component.get("type", "")).upper() != "BUTTONS":
                continue
            for button in component.get("buttons", []):
                if str(button.get("type", "")).upper() == "URL":
                    return str(button.get("text") or "")
        return ""

    def template_analytics(self, query: AnalyticsQuery) -> dict[str, Any]:
        """``GET /{waba_id}/template_analytics`` (``delivery.simulator.analytics``)."""
        return self.analytics.report(query)

    def templates_for(self, waba_id: str) -> list[TemplateSpec]:
        default = self.config.waba_id
        return [t for t in self.templates.values() if (t.waba_id or default) == waba_id]

    # --- the send endpoint --------------------------------------------------------------

    def handle_send(
        self,
        *,
        phone_number_id: str,
        authorization: str,
        raw: bytes,
        endpoint: str = MESSAGES_ENDPOINT,
    ) -> Reply:
        """Decide one send: validate like Meta, apply limits and faults, record, answer.

        ``endpoint`` is ``messages`` or ``marketing_messages`` (the Marketing Messages API:
        marketing templates only, 131055 for any other; its sends are priced
        ``marketing_lite`` once the WABA is onboarded).
        """
        cfg = self.config
        req = _Request(
            self.recorder.next_seq(), time.monotonic(), time.time(), phone_number_id, raw
        )
        req.endpoint = endpoint
        token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
        number = self.numbers.get(phone_number_id)
        if number is None and cfg.auto_register and token:
            number = self.add_number(
                {
                    "phone_number_id": phone_number_id,
                    "access_token": token,
                    "rate": cfg.default_rate,
                }
            )
        if not token or (number is not None and token != number.access_token):
            return self._reply(req, *errors.auth_error(), "190")
        if number is None:
            return self._reply(req, *errors.unknown_object_error(phone_number_id), "100")
        template = None
        category = "service"
        try:
            body = _json(raw)
            if endpoint == MARKETING_ENDPOINT and (
                not isinstance(body, dict) or body.get("type") != "template"
            ):
                raise Invalid(100, "Message must be a template message.")
            check_shape(body)
            # ``to`` (a phone) wins over ``recipient`` (a user id) when both are given.
            req.to = body.get("to") or body["recipient"]
            req.callback = body.get("biz_opaque_callback_data")
            if body.get("type") == "template":
                req.template = body["template"]["name"]
                template = self._template(body)
                req.template_id = template.id
                check_template(body, template, now_ms=int(time.time() * 1000))
                if is_user_id(req.to) and template.category.upper() == "AUTHENTICATION":
                    # Meta: one-tap, zero-tap and copy-code authentication templates (the
                    # only kinds there are) still need a phone number.
                    raise Invalid(131062, errors.USER_ID_NOT_SUPPORTED)
                category = self._route(endpoint, body, template)
        except Invalid as exc:
            return self._reply(req, *errors.graph_error(exc.code, exc.details), str(exc.code))
        recipient = recipient_key(req.to)
        code, held, late_fail = self._decide(number, recipient, req.mono)
        if code is not None:
            return self._reply(req, *errors.graph_error(code), str(code))
        if template is not None and late_fail is None:
            late_fail = us_marketing_failure(req.to, template.category)
        wamid = self.recorder.wamid(req.seq, req.to)
        statuses = self.webhooks.schedule(
            SentMessage(
                phone_number_id=phone_number_id,
                display_phone_number=number.display_phone_number or _digits(phone_number_id),
                waba_id=number.waba_id or cfg.waba_id,
                wamid=wamid,
                recipient_id=recipient,
                callback_data=req.callback,
                category=category,
                accepted_at=req.wall,
                template_name=req.template or "",
            ),
            failure_code=late_fail,
        )
        if template is not None:
            self.analytics.send(
                product=_product(endpoint),
                template_id=template.id,
                wall=req.wall,
                statuses=["failed"] if late_fail else ["sent", *statuses],
            )
        outcome = ACCEPTED_HELD if held else ACCEPTED_LATE_FAIL if late_fail else ACCEPTED
        status = None
        if template is not None:
            # The draw only when a share is configured: a run without pacing consumes the
            # same random numbers as before, so seeded runs replay unchanged.
            draw = self.rng.random() if cfg.quality_held_fraction else 1.0
            paced = cfg.quality_held(template.name, draw)
            self.quality_held += paced
            status = HELD_FOR_QUALITY_ASSESSMENT if paced else "accepted"
        self.endpoints[endpoint] += 1
        reply = self._reply(req, 200, _success(req.to, wamid, status), outcome)
        if held:
            reply.delay_s = cfg.timeout_hold_s
        return reply

    def _route(self, endpoint: str, body: dict[str, Any], template: TemplateSpec) -> str:
        """The send's pricing category, or ``Invalid`` where the endpoint refuses it."""
        cfg = self.config
        marketing = template.category.upper() == "MARKETING"
        if endpoint == MESSAGES_ENDPOINT:
            switched = cfg.marketing_disabled_after is not None and (
                self.endpoints[MESSAGES_ENDPOINT] >= cfg.marketing_disabled_after
            )
            if marketing and (cfg.marketing_disabled_on_cloud_api or switched):
                raise Invalid(131063, errors.TITLES[131063][1])
            return template.category.lower()
        if not marketing:
            raise Invalid(131055, errors.TITLES[131055][1])
        policy = body.get("product_policy", "CLOUD_API_FALLBACK")
        if policy not in ("CLOUD_API_FALLBACK", "STRICT"):
            raise Invalid(100, "product_policy must be CLOUD_API_FALLBACK or STRICT.")
        sharing = body.get("message_activity_sharing")
        if sharing is not None and not isinstance(sharing, bool):
            raise Invalid(100, "message_activity_sharing must be a boolean.")
        if cfg.mm_onboarding_status == "ONBOARDED":
            return "marketing_lite"
        if policy == "STRICT":
            raise Invalid(
                100,
                "The WhatsApp Business Account is not onboarded to the Marketing Messages API "
                f"({cfg.mm_onboarding_status}).",
            )
        return "marketing"  # delivered through Cloud API, as the fallback policy says

    def _template(self, body: dict[str, Any]) -> TemplateSpec:
        name = body["template"]["name"]
        language = body["template"]["language"]["code"]
        template = self.templates.get((name, language))
        if template is None or template.status in ("PENDING", "REJECTED", "DELETED"):
            raise Invalid(132001, f"template name ({name}) does not exist in {language}")
        if template.status == "PAUSED":
            raise Invalid(132015, f"template {name} is paused")
        if template.status == "DISABLED":
            raise Invalid(132016, f"template {name} is disabled")
        return template

    def _decide(
        self, number: NumberSpec, recipient: str, now: float
    ) -> tuple[int | None, bool, int | None]:
        """(sync error code or None, answer held past the timeout, async failure code)."""
        cfg = self.config
        rng = self.rng
        if cfg.mode == "all_5xx":
            return self._five_xx(), False, None
        if cfg.mode == "all_throttle":
            return 130429, False, None
        bucket = self.buckets.get(number.phone_number_id)
        if bucket is None:
            bucket = TokenBucket(number.rate, number.bucket_size, now)
            self.buckets[number.phone_number_id] = bucket
        if not bucket.take(now):
            return 130429, False, None
        if cfg.error_5xx_fraction and rng.random() < cfg.error_5xx_fraction:
            return self._five_xx(), False, None
        fixed = cfg.fail_recipients.get(recipient)
        if fixed is not None:
            return fixed, False, None
        late = cfg.async_fail_recipients.get(recipient)
        if late is not None:
            return None, False, late
        if cfg.permanent_fraction and rng.random() < cfg.permanent_fraction:
            return cfg.permanent_code, False, None
        if cfg.pair_limit_enabled and not self.pairs.take(
            (number.phone_number_id, recipient),
            rate=cfg.pair_rate_per_s,
            burst=cfg.pair_burst,
            now=now,
        ):
            return 131056, False, None
        late_fail = None
        if cfg.messaging_limit is not None:
            window = self.reach.setdefault(number.phone_number_id, ReachWindow())
            if not window.admit(
                recipient, limit=cfg.messaging_limit, window_s=cfg.messaging_limit_window_s, now=now
            ):
                self.over_limit += 1
                if cfg.over_limit_sync:
                    return cfg.over_limit_code, False, None
                late_fail = cfg.over_limit_code
        if late_fail is None and cfg.async_failure_fraction:
            if rng.random() < cfg.async_failure_fraction:
                late_fail = cfg.async_failure_code
        held = cfg.mode == "all_timeout" or (
            cfg.timeout_fraction > 0 and rng.random() < cfg.timeout_fraction
        )
        return None, held, late_fail

    def _five_xx(self) -> int:
        return 131000 if self.rng.random() < 0.5 else 2

    def _reply(self, req: _Request, status: int, payload: bytes, outcome: str) -> Reply:
        self.recorder.add(
            seq=req.seq,
            mono=req.mono,
            wall=req.wall,
            phone_number_id=req.phone_number_id,
            to=req.to,
            template=req.template,
            outcome=outcome,
            callback_data=req.callback,
            body=req.raw,
            template_id=req.template_id,
            endpoint=req.endpoint,
        )
        return Reply(status=status, body=payload, delay_s=self.latency_s(), outcome=outcome)

    def latency_s(self) -> float:
        cfg = self.config
        if not cfg.latency_ms and not cfg.jitter_ms:
            return 0.0
        if cfg.latency_distribution == "normal":
            ms = self.rng.gauss(cfg.latency_ms, cfg.jitter_ms)
        else:
            ms = cfg.latency_ms + self.rng.uniform(-cfg.jitter_ms, cfg.jitter_ms)
        return max(0.0, ms) / 1000.0


# A template send Meta holds while it assesses the template's quality (pacing): see
# ``SimConfig.quality_held_templates``.
HELD_FOR_QUALITY_ASSESSMENT = "held_for_quality_assessment"


def _product(endpoint: str) -> str:
    return MARKETING_MESSAGES if endpoint == MARKETING_ENDPOINT else CLOUD_API


def _success(to: str, wamid: str, message_status: str | None) -> bytes:
    """Meta's answer to an accepted send; ``message_status`` (``accepted`` or
    ``held_for_quality_assessment``) only for a template send, as Meta answers."""
    message: dict[str, Any] = {"id": wamid}
    if message_status is not None:
        message["message_status"] = message_status
    # A send to a user id is answered with the user_id and no wa_id (Meta, 2026).
    contact = (
        {"input": to, "user_id": to} if is_user_id(to) else {"input": to, "wa_id": _digits(to)}
    )
    return _dumps({"messaging_product": "whatsapp", "contacts": [contact], "messages": [message]})


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise Invalid(100, "The request body is not valid JSON.") from exc


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _digits(phone: str) -> str:
    return "".join(ch for ch in str(phone) if ch.isdigit())
