"""The simulator's knobs, its registered numbers and its templates (all plain data)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

MODES = ("normal", "all_5xx", "all_timeout", "all_throttle")
DISTRIBUTIONS = ("uniform", "normal")
DEFAULT_WABA_ID = "102290129340398"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")


@dataclass
class SimConfig:
    """Everything that can change at run time through ``configure`` or ``POST /_sim/config``."""

    # Response latency: latency_ms, spread by jitter_ms (uniform +-, or normal sigma).
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    latency_distribution: str = "uniform"
    # normal | all_5xx | all_timeout | all_throttle
    mode: str = "normal"
    # Fault fractions, each drawn independently per accepted-so-far request.
    error_5xx_fraction: float = 0.0
    timeout_fraction: float = 0.0  # accepted and sent, but the answer is held back
    timeout_hold_s: float = 30.0
    permanent_fraction: float = 0.0  # synchronous per-recipient error
    permanent_code: int = 131026
    async_failure_fraction: float = 0.0  # accepted, then a `failed` status webhook
    async_failure_code: int = 131026
    # Recipients ("+15550001" or digits) that always fail with the given code.
    fail_recipients: dict[str, int] = field(default_factory=dict)
    # Recipients whose send is accepted, then fails by status webhook with the given code
    # (131050: the user stopped marketing messages).
    async_fail_recipients: dict[str, int] = field(default_factory=dict)
    # What users do after a delivered message (webhooks from the user, 2026 shapes):
    # reply "STOP" / tap "stop marketing messages" (user_preferences), by fraction of
    # delivered sends or by recipient. Users in username_recipients hide their phone: their
    # messages carry only from_user_id, and every callback gives their username.
    # webhook_user_ids: sent/delivered/read statuses name the user in value-level contacts[]
    # (their user_id: the only place Meta names it for a send to a phone);
    # webhook_parent_user_ids: every user has a parent user id too (parent_user_id,
    # from_parent_user_id), as under a business portfolio with child businesses.
    stop_reply_fraction: float = 0.0
    preference_stop_fraction: float = 0.0
    reply_recipients: dict[str, str] = field(default_factory=dict)
    preference_recipients: dict[str, str] = field(default_factory=dict)
    username_recipients: list[str] = field(default_factory=list)
    user_delay_ms: float = 80.0
    webhook_user_ids: bool = True
    webhook_parent_user_ids: bool = False
    # Template pacing (Meta, "Template pacing", Updated 2025-12-08, and "Business portfolio
    # pacing"): past a threshold Meta holds a paced template's sends while it gathers
    # feedback, and its send response says so per message:
    #   {"messaging_product": "whatsapp", "contacts": [{"input": …, "wa_id": …}],
    #    "messages": [{"id": "wamid…", "message_status": "held_for_quality_assessment"}]}
    # where an unheld template send carries "message_status": "accepted" (the shape of
    # tests/fixtures/real/graph/meta_doc_send_response_template_accepted.json). Every send
    # of the templates named here, and a share of any other template's sends, are answered
    # held; their status webhooks follow as usual (Meta releases most held messages). A
    # held message Meta drops is a `failed` webhook with 132015: async_fail_recipients or
    # async_failure_code. Free-form (non-template) sends are never held.
    quality_held_templates: list[str] = field(default_factory=list)
    quality_held_fraction: float = 0.0
    # Value-level errors[] (no message named, e.g. an asynchronous 130429), sent after a
    # share of the accepted sends.
    value_error_fraction: float = 0.0
    value_error_code: int = 130429
    # Pair rate limit (131056): per (number, recipient) token bucket.
    pair_limit_enabled: bool = True
    pair_rate_per_s: float = 1 / 6
    pair_burst: int = 45
    # Messaging limit: unique recipients per number per rolling window; None = unlimited.
    # Meta documents no error for it; past it the send is accepted and later fails.
    messaging_limit: int | None = None
    messaging_limit_window_s: float = 24 * 3600.0
    over_limit_code: int = 131026
    over_limit_sync: bool = False
    # The Marketing Messages API (POST /{phone_number_id}/marketing_messages): every WABA's
    # onboarding status as GET /{waba_id} reports it (marketing_messages_onboarding_status;
    # only ONBOARDED sends there, as marketing_lite; otherwise a CLOUD_API_FALLBACK send is
    # delivered as Cloud API marketing and a STRICT one refused), and whether the business
    # turned marketing templates off on /messages (then refused there with 131063).
    mm_onboarding_status: str = "ONBOARDED"
    marketing_disabled_on_cloud_api: bool = False
    # Turns marketing off on /messages once this many sends were accepted there: the
    # business flipping the switch in the middle of a campaign.
    marketing_disabled_after: int | None = None
    # Unknown phone_number_ids register themselves with the token they present.
    auto_register: bool = False
    default_rate: float = 80.0
    # Status webhooks.
    callback_url: str | None = None
    app_secret: str = ""
    waba_id: str = DEFAULT_WABA_ID
    sent_delay_ms: float = 10.0
    delivered_delay_ms: float = 30.0
    read_delay_ms: float = 60.0
    webhook_jitter_ms: float = 0.0
    delivered_fraction: float = 1.0
    read_fraction: float = 0.5
    # Per template name, the share of its delivered sends that are read (instead of
    # read_fraction): two templates of an A/B test can be made to differ.
    template_read_fractions: dict[str, float] = field(default_factory=dict)
    webhook_batch_size: int = 1
    webhook_batch_wait_ms: float = 20.0
    webhook_out_of_order: bool = False
    webhook_duplicate_fraction: float = 0.0
    webhook_retry_max: int = 8
    webhook_retry_base_s: float = 0.5
    webhook_retry_cap_s: float = 60.0
    webhook_concurrency: int = 8
    webhook_timeout_s: float = 10.0
    webhook_conversation: bool = True
    # Records: compact rows up to record_cap; raw bodies for the most recent body_cap.
    record_cap: int = 2_000_000
    body_cap: int = 10_000
    seed: int | None = None

    def updated(self, changes: dict[str, Any]) -> SimConfig:
        """A copy with ``changes`` applied; raises ValueError on unknown keys or bad values."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown config keys: {sorted(unknown)}")
        new = dataclasses.replace(self, **changes)
        new.check()
        return new

    def check(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self.latency_distribution not in DISTRIBUTIONS:
            raise ValueError(f"latency_distribution must be one of {DISTRIBUTIONS}")
        for name in (
            "error_5xx_fraction",
            "timeout_fraction",
            "permanent_fraction",
            "async_failure_fraction",
            "delivered_fraction",
            "read_fraction",
            "webhook_duplicate_fraction",
            "stop_reply_fraction",
            "preference_stop_fraction",
            "value_error_fraction",
            "quality_held_fraction",
        ):
            value = getattr(self, name)
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.webhook_batch_size < 1 or self.webhook_concurrency < 1:
            raise ValueError("webhook_batch_size and webhook_concurrency must be >= 1")
        key = recipient_key
        self.fail_recipients = {key(k): int(v) for k, v in self.fail_recipients.items()}
        self.async_fail_recipients = {key(k): int(v) for k, v in self.async_fail_recipients.items()}
        self.reply_recipients = {key(k): str(v) for k, v in self.reply_recipients.items()}
        self.preference_recipients = {key(k): str(v) for k, v in self.preference_recipients.items()}
        self.username_recipients = [key(k) for k in self.username_recipients]
        self.quality_held_templates = [str(name) for name in self.quality_held_templates]
        self.template_read_fractions = {
            str(name): float(share) for name, share in self.template_read_fractions.items()
        }
        for name, share in self.template_read_fractions.items():
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"template_read_fractions[{name!r}] must be within [0, 1]")

    def read_share(self, template_name: str) -> float:
        """The share of ``template_name``'s delivered sends that are read."""
        return self.template_read_fractions.get(template_name, self.read_fraction)

    def quality_held(self, template_name: str, draw: float) -> bool:
        """Whether a send of ``template_name`` is answered ``held_for_quality_assessment``
        (``draw``: a uniform random number in [0, 1), drawn by the caller)."""
        if template_name in self.quality_held_templates:
            return True
        return draw < self.quality_held_fraction

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["app_secret"] = "***" if self.app_secret else ""
        return data


@dataclass
class NumberSpec:
    """A registered business phone number and its throughput."""

    phone_number_id: str
    access_token: str
    rate: float = 80.0  # messages per second
    burst: float | None = None  # bucket size; None = one second's worth
    display_phone_number: str = ""
    waba_id: str | None = None
    # What GET /{phone_number_id} answers (Graph API field names); a blank field is left
    # out of the answer. The throughput level defaults to what the rate is (HIGH: 1,000/s).
    verified_name: str = "Whatsblast Simulator"
    quality_rating: str = "GREEN"
    messaging_limit_tier: str = ""
    throughput_level: str = ""
    name_status: str = "APPROVED"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NumberSpec:
        names = {f.name for f in dataclasses.fields(cls)}
        spec = cls(**{k: v for k, v in data.items() if k in names})
        spec.phone_number_id = str(spec.phone_number_id)
        if spec.rate <= 0:
            raise ValueError("rate must be positive")
        return spec

    @property
    def bucket_size(self) -> float:
        return float(self.burst) if self.burst else max(1.0, float(self.rate))

    def as_graph(self, version: str = "v25.0") -> dict[str, Any]:
        """The number as ``GET /{version}/{phone_number_id}`` describes it.

        The portfolio's limit is ``whatsapp_business_manager_messaging_limit`` from v24.0
        on and ``messaging_limit_tier`` up to v23.0 (Meta, "Messaging limits").
        """
        level = self.throughput_level or ("HIGH" if self.rate >= 1000 else "STANDARD")
        data: dict[str, Any] = {
            "id": self.phone_number_id,
            "display_phone_number": self.display_phone_number or self.phone_number_id,
            "verified_name": self.verified_name,
            "quality_rating": self.quality_rating,
            messaging_limit_field(version): self.messaging_limit_tier,
            "throughput": {"level": level},
            "name_status": self.name_status,
            "platform_type": "CLOUD_API",
            "status": "CONNECTED",
        }
        return {k: v for k, v in data.items() if v}


def messaging_limit_field(version: str) -> str:
    """The number's messaging-limit field at a Graph version ("v23.0" -> the old name)."""
    match = re.fullmatch(r"v?(\d+)(?:\.\d+)?", version.strip())
    if match is not None and int(match.group(1)) <= 23:
        return "messaging_limit_tier"
    return "whatsapp_business_manager_messaging_limit"


@dataclass
class ButtonSpec:
    index: int
    sub_type: str  # the type in lower case: quick_reply, url, copy_code, flow, mpm, spm, ...
    dynamic: bool  # a URL button whose url has a {{1}} suffix

    @property
    def required(self) -> bool:
        """Whether a send must carry this button's component (Meta: 132000 without)."""
        return self.dynamic or self.sub_type in ("copy_code", "mpm")


@dataclass(frozen=True)
class PartSpec:
    """The header, body and buttons of a template or of one carousel card."""

    header_format: str | None  # None (no header parameter), text, image, ..., product
    header_placeholder: str
    body_placeholders: list[str]
    buttons: list[ButtonSpec]


def part_spec(components: Any) -> PartSpec:
    header_format: str | None = None
    header_placeholder = ""
    body: list[str] = []
    buttons: list[ButtonSpec] = []
    for component in components if isinstance(components, list) else ():
        kind = str(component.get("type", "")).upper()
        if kind == "HEADER":
            fmt = str(component.get("format", "TEXT")).lower()
            found = _PLACEHOLDER.findall(component.get("text", ""))
            header_placeholder = str(found[0]) if found else ""
            header_format = fmt if fmt != "text" or found else None
        elif kind == "BODY":
            for name in _PLACEHOLDER.findall(component.get("text", "")):
                if name not in body:
                    body.append(name)
        elif kind == "BUTTONS":
            for index, button in enumerate(component.get("buttons", [])):
                sub_type = str(button.get("type", "")).lower()
                dynamic = sub_type == "url" and bool(_PLACEHOLDER.search(button.get("url", "")))
                buttons.append(ButtonSpec(index=index, sub_type=sub_type, dynamic=dynamic))
    return PartSpec(header_format, header_placeholder, body, buttons)


@dataclass
class TemplateSpec:
    """A template as Meta holds it (``components`` in Meta's shape) plus what a send needs."""

    name: str
    language: str
    components: list[dict[str, Any]]
    status: str = "APPROVED"
    category: str = "MARKETING"
    id: str = ""
    parameter_format: str = "POSITIONAL"
    waba_id: str | None = None
    quality_score: str = "GREEN"
    rejected_reason: str = ""
    message_send_ttl_seconds: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateSpec:
        """Meta's shape (``components``) or the shorthand of ``shorthand_components``."""
        data = dict(data)
        if "components" not in data:
            data["components"] = shorthand_components(
                body_params=data.pop("body_params", 0),
                header=data.pop("header", None),
                buttons=data.pop("buttons", None) or [],
            )
        names = {f.name for f in dataclasses.fields(cls)}
        spec = cls(**{k: v for k, v in data.items() if k in names})
        if any(_PLACEHOLDER.search(c.get("text", "")) and not _is_positional(c) for c in spec.body):
            spec.parameter_format = "NAMED"
        return spec

    @property
    def body(self) -> list[dict[str, Any]]:
        return [c for c in self.components if c.get("type", "").upper() == "BODY"]

    def header_format(self) -> str | None:
        """None (no header parameter), ``text``, ``image``, ``video``, ``document`` or
        ``product``."""
        return part_spec(self.components).header_format

    def header_placeholder(self) -> str:
        """A text header's placeholder name ("1" or "order_id"); "" without one."""
        return part_spec(self.components).header_placeholder

    def body_placeholders(self) -> list[str]:
        """Placeholder names in order: ``["1", "2"]`` or ``["first_name"]``."""
        return part_spec(self.components).body_placeholders

    def buttons(self) -> list[ButtonSpec]:
        return part_spec(self.components).buttons

    def part(self) -> PartSpec:
        return part_spec(self.components)

    def cards(self) -> list[PartSpec]:
        """A carousel's cards as approved ([] without a carousel)."""
        for component in self.components:
            if str(component.get("type", "")).upper() == "CAROUSEL":
                return [part_spec(card.get("components")) for card in component.get("cards", [])]
        return []

    def offer_expires(self) -> bool:
        """A limited-time offer whose sends must give their expiry."""
        for component in self.components:
            if str(component.get("type", "")).upper() == "LIMITED_TIME_OFFER":
                lto = component.get("limited_time_offer") or {}
                return lto.get("has_expiration") is True
        return False

    def as_graph(self) -> dict[str, Any]:
        """The template as ``GET /{waba_id}/message_templates`` lists it."""
        data: dict[str, Any] = {
            "name": self.name,
            "parameter_format": self.parameter_format,
            "components": self.components,
            "language": self.language,
            "status": self.status,
            "category": self.category,
            "id": self.id,
            "quality_score": {"score": self.quality_score},
        }
        if self.status == "REJECTED":
            data["rejected_reason"] = self.rejected_reason or "INVALID_FORMAT"
        if self.message_send_ttl_seconds is not None:
            data["message_send_ttl_seconds"] = self.message_send_ttl_seconds
        return data


def shorthand_components(
    *, body_params: int | list[str], header: str | None, buttons: list[Any]
) -> list[dict[str, Any]]:
    """Meta components from ``body_params`` (count or names), ``header`` and ``buttons``.

    ``header``: None, ``"text"`` (one text parameter), ``"image"``, ``"video"`` or
    ``"document"``; ``buttons``: ``"quick_reply"`` / ``"url"`` (with a dynamic suffix) or
    ``{"sub_type": ...}`` dicts.
    """
    components: list[dict[str, Any]] = []
    if header == "text":
        components.append({"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}"})
    elif header:
        components.append({"type": "HEADER", "format": header.upper()})
    if isinstance(body_params, int):
        names = [str(i) for i in range(1, body_params + 1)]
    else:
        names = list(body_params)
    text = " ".join("{{" + name + "}}" for name in names) or "Hello"
    components.append({"type": "BODY", "text": f"Message: {text}"})
    rendered = []
    for button in buttons:
        sub_type = button if isinstance(button, str) else button["sub_type"]
        if sub_type == "url":
            rendered.append({"type": "URL", "text": "Open", "url": "https://example.com/{{1}}"})
        else:
            rendered.append({"type": "QUICK_REPLY", "text": "Stop promotions"})
    if rendered:
        components.append({"type": "BUTTONS", "buttons": rendered})
    return components


def _is_positional(component: dict[str, Any]) -> bool:
    return all(name.isdigit() for name in _PLACEHOLDER.findall(component.get("text", "")))


# Meta's business-scoped user id: country, a dot, (ENT. for a parent id,) letters and digits.
USER_ID_RE = re.compile(r"^[A-Z]{2}\.(?:ENT\.)?[A-Za-z0-9]+$")


def is_user_id(value: str) -> bool:
    return USER_ID_RE.match(str(value)) is not None


def recipient_key(value: str) -> str:
    """How the simulator knows a recipient: a phone by its digits, a user id as given."""
    return str(value) if is_user_id(value) else _digits(value)


def user_id_for(recipient: str) -> str:
    """The simulator's business-scoped user id of a recipient: stable, Meta's 2026 shape
    (a recipient that is already a user id is its own)."""
    if is_user_id(recipient):
        return recipient
    digest = hashlib.blake2b(_digits(recipient).encode(), digest_size=8).digest()
    return f"US.{int.from_bytes(digest, 'big')}"


def parent_user_id_for(recipient: str) -> str:
    """The simulator's parent business-scoped user id of a recipient (``US.ENT.…``)."""
    return "US.ENT." + user_id_for(recipient).rsplit(".", 1)[1]


def username_for(recipient: str) -> str:
    """The simulator's username of a recipient, written as Meta's page writes one (``@…``)."""
    return "@sim" + user_id_for(recipient).rsplit(".", 1)[1][-8:]


def _digits(phone: str) -> str:
    return "".join(ch for ch in str(phone) if ch.isdigit())
