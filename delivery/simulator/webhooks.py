"""Status webhooks: scheduled after accepted sends, batched, signed, retried until 200.

Nothing here runs on the send path: a send only schedules timers; a batcher task and a
bounded number of POSTs in flight do the rest on the same event loop.

The shapes, and where Meta documents them:

* A status (``id``, ``status``, ``timestamp``, ``recipient_id``, ``biz_opaque_callback_data``,
  ``conversation``, ``pricing``, ``errors`` on ``failed``): "Status messages webhook
  reference", https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status
  (Updated 2025-11-20).
* Who the user is (business-scoped user ids): "Business-scoped user IDs",
  https://developers.facebook.com/documentation/business-messaging/whatsapp/business-scoped-user-ids
  (Updated 2026-02-06). A status of a send to a phone carries ``recipient_id`` (the phone)
  and no ``recipient_user_id``, which is "only included if the message was sent to a
  BSUID"; the user's id comes in the value's ``contacts[{profile{name, username?}, wa_id?,
  user_id, parent_user_id?}]``, on sent, delivered and read statuses, not on failed ones.
  A status of a send to a user id carries ``recipient_user_id`` and neither
  ``recipient_id`` nor a ``wa_id``. Inbound messages name the sender by ``from`` (omitted
  when the phone is hidden), ``from_user_id`` and ``from_parent_user_id``, beside the same
  ``contacts[]``; ``user_preferences`` items by ``wa_id?``, ``user_id``, ``parent_user_id?``.
  A later revision of the same page (Updated 2026-05-07) says ``recipient_user_id`` (and
  ``recipient_parent_user_id``) come on every status but a failed one to a phone, and the
  username only on delivered and read; the simulator keeps the 2026-02-06 shape, where the
  ``contacts[]`` entry is the only place the id of a phone is named (the receiver reads
  both).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp

from delivery.simulator.config import (
    SimConfig,
    is_user_id,
    parent_user_id_for,
    user_id_for,
    username_for,
)
from delivery.simulator.errors import webhook_error

logger = logging.getLogger(__name__)

# Meta signs the payload with these characters escaped; receivers that re-serialise the
# JSON before hashing get a mismatch, as they would with Meta.
_ESCAPES = {"/": "\\/", "<": "\\u003C", "%": "\\u0025", "@": "\\u0040"}


def meta_json(payload: dict[str, Any]) -> bytes:
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=True)
    for char, escaped in _ESCAPES.items():
        text = text.replace(char, escaped)
    return text.encode()


def signature(app_secret: str, body: bytes) -> str:
    digest = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


@dataclass
class SentMessage:
    phone_number_id: str
    display_phone_number: str
    waba_id: str
    wamid: str
    recipient_id: str
    callback_data: str | None
    category: str  # pricing category: marketing, utility, authentication, service
    accepted_at: float  # wall time
    template_name: str = ""  # a template send's template ('' for free-form text)


class WebhookDispatcher:
    def __init__(self, config: SimConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        # (message, list the item goes in: statuses | messages | user_preferences, item)
        self.queue: asyncio.Queue[tuple[SentMessage, str, dict[str, Any]]] = asyncio.Queue()
        self.counts: Counter[str] = Counter()
        self.pending = 0  # statuses scheduled or queued but not yet acknowledged (or dropped)
        self.session: aiohttp.ClientSession | None = None
        self.batcher: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.timers: set[asyncio.TimerHandle] = set()
        self.semaphore = asyncio.Semaphore(config.webhook_concurrency)

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.config.webhook_timeout_s),
            # No pool limit of its own: the semaphore (webhook_concurrency, which the
            # config can change while running) bounds the POSTs in flight.
            connector=aiohttp.TCPConnector(limit=0),
        )
        self.batcher = asyncio.create_task(self._batch_loop())

    async def stop(self) -> None:
        for timer in self.timers:
            timer.cancel()
        tasks = [*self.tasks, *([self.batcher] if self.batcher else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()

    def reconfigure(self, config: SimConfig) -> None:
        if config.webhook_concurrency != self.config.webhook_concurrency:
            self.semaphore = asyncio.Semaphore(config.webhook_concurrency)
        self.config = config

    def reset_counts(self) -> None:
        self.counts.clear()

    # --- scheduling ---------------------------------------------------------------------

    def schedule(self, message: SentMessage, *, failure_code: int | None) -> list[str]:
        """Plan the statuses of one accepted send (nothing if no callback URL is set);
        returns the statuses planned, for the template analytics."""
        cfg = self.config
        if not cfg.callback_url:
            return []
        if failure_code is not None:
            plan = [("failed", cfg.sent_delay_ms)]
        else:
            plan = [("sent", cfg.sent_delay_ms)]
            delivered = self.rng.random() < cfg.delivered_fraction
            if delivered:
                plan.append(("delivered", cfg.delivered_delay_ms))
            if self.rng.random() < cfg.read_share(message.template_name):
                plan.append(("read", cfg.read_delay_ms))
        delays = [delay + self.rng.uniform(0, cfg.webhook_jitter_ms) for _, delay in plan]
        if cfg.webhook_out_of_order:
            self.rng.shuffle(delays)
        priced = {"sent", "delivered"} if len(plan) > 1 and plan[1][0] == "delivered" else None
        for (status, _), delay in zip(plan, delays, strict=True):
            has_price = priced is None or status in priced
            item = self._status(message, status, delay, failure_code, has_price)
            self._later(delay / 1000.0, message, item)
            if self.rng.random() < cfg.webhook_duplicate_fraction:
                self._later((delay + self.rng.uniform(0, 200)) / 1000.0, message, item)
        if failure_code is None and len(plan) > 1:
            self._user_reacts(message, max(delays))
        if cfg.value_error_fraction and self.rng.random() < cfg.value_error_fraction:
            self._later(
                max(delays) / 1000.0, message, webhook_error(cfg.value_error_code), "errors"
            )
        return [status for status, _ in plan]

    def post_now(self, payload: dict[str, Any]) -> bool:
        """Post one callback Meta sends on its own (signed, retried like the statuses);
        False when no callback URL is set."""
        if not self.config.callback_url:
            return False
        self.pending += 1
        self.counts["events"] += 1
        self._spawn(self._post(meta_json(payload), 1, attempt=0))
        return True

    def _user_reacts(self, message: SentMessage, after_ms: float) -> None:
        """What the user does once the message is delivered: reply, or stop marketing."""
        cfg = self.config
        recipient = message.recipient_id
        text = cfg.reply_recipients.get(recipient)
        if text is None and cfg.stop_reply_fraction and self.rng.random() < cfg.stop_reply_fraction:
            text = "STOP"
        choice = cfg.preference_recipients.get(recipient)
        if (
            choice is None
            and cfg.preference_stop_fraction
            and self.rng.random() < cfg.preference_stop_fraction
        ):
            choice = "stop"
        delay_s = (after_ms + cfg.user_delay_ms) / 1000.0
        stamp = str(int(message.accepted_at + delay_s))
        # A user reached by their user id has no phone the simulator could show.
        hidden = recipient in cfg.username_recipients or is_user_id(recipient)
        user_id = user_id_for(recipient)
        parent = parent_user_id_for(recipient) if cfg.webhook_parent_user_ids else ""
        if text is not None:
            item: dict[str, Any] = {
                "id": f"wamid.in.{message.wamid}",
                "timestamp": stamp,
                "type": "text",
                "text": {"body": text},
                "from_user_id": user_id,
            }
            if parent:
                item["from_parent_user_id"] = parent
            if not hidden:
                item["from"] = recipient
            self._later(delay_s, message, item, "messages")
        if choice is not None:
            pref: dict[str, Any] = {
                "user_id": user_id,
                "detail": f"User requested to {choice} marketing messages",
                "category": "marketing_messages",
                "value": choice,
                "timestamp": int(message.accepted_at + delay_s),
            }
            if parent:
                pref["parent_user_id"] = parent
            if not hidden:
                pref["wa_id"] = recipient
            self._later(delay_s, message, pref, "user_preferences")

    def _later(
        self, delay_s: float, message: SentMessage, item: dict[str, Any], kind: str = "statuses"
    ) -> None:
        self.pending += 1
        self.counts["scheduled"] += 1
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle

        def fire() -> None:
            self.timers.discard(timer)
            self.queue.put_nowait((message, kind, item))

        timer = loop.call_later(max(0.0, delay_s), fire)
        self.timers.add(timer)

    def _status(
        self,
        message: SentMessage,
        status: str,
        delay_ms: float,
        failure_code: int | None,
        has_price: bool,
    ) -> dict[str, Any]:
        stamp = int(message.accepted_at + delay_ms / 1000.0)
        item: dict[str, Any] = {"id": message.wamid, "status": status, "timestamp": str(stamp)}
        # The recipient as the send named them: a phone in recipient_id, or a user id in
        # recipient_user_id, never both (Meta, 2026: recipient_user_id only for a send to a
        # user id). The user id of a phone is in the value's contacts[] (_envelope).
        if is_user_id(message.recipient_id):
            item["recipient_user_id"] = message.recipient_id
        else:
            item["recipient_id"] = message.recipient_id
        if message.callback_data:
            item["biz_opaque_callback_data"] = message.callback_data
        if status == "failed":
            item["errors"] = [webhook_error(failure_code or 131026)]
            return item
        if has_price and status in ("sent", "delivered", "read"):
            if self.config.webhook_conversation:
                conversation: dict[str, Any] = {
                    "id": _conversation_id(message),
                    "origin": {"type": message.category},
                }
                if status == "sent":
                    conversation["expiration_timestamp"] = str(int(message.accepted_at) + 86400)
                item["conversation"] = conversation
            item["pricing"] = {
                "billable": True,
                "pricing_model": "PMP",
                "type": "regular",
                "category": message.category,
            }
        return item

    # --- delivery -----------------------------------------------------------------------

    async def _batch_loop(self) -> None:
        while True:
            batch = [await self.queue.get()]
            size = self.config.webhook_batch_size
            deadline = time.monotonic() + self.config.webhook_batch_wait_ms / 1000.0
            while len(batch) < size:
                if not self.queue.empty():
                    # Cheap path: take what is already queued without a timer per item.
                    batch.append(self.queue.get_nowait())
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), remaining))
                except TimeoutError:
                    break
            if self.config.webhook_out_of_order:
                self.rng.shuffle(batch)
            body = meta_json(_envelope(batch, self.config))
            self._spawn(self._post(body, len(batch), attempt=0))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _post(self, body: bytes, n: int, *, attempt: int) -> None:
        cfg = self.config
        headers = {
            "Content-Type": "application/json",
            "X-Hub-Signature-256": signature(cfg.app_secret, body),
        }
        ok = False
        assert self.session is not None
        async with self.semaphore:
            try:
                async with self.session.post(
                    str(cfg.callback_url), data=body, headers=headers
                ) as r:
                    await r.read()
                    ok = r.status == 200
            except (aiohttp.ClientError, TimeoutError) as exc:
                logger.debug("webhook post failed: %s", exc)
            except Exception:  # noqa: BLE001 - a lost task would leave its statuses pending forever
                logger.warning("webhook post failed unexpectedly", exc_info=True)
        self.counts["posts"] += 1
        if ok:
            self.counts["posts_ok"] += 1
            self.counts["statuses_delivered"] += n
            self.pending -= n
            return
        self.counts["posts_failed"] += 1
        if attempt >= cfg.webhook_retry_max:
            logger.warning("webhook post of %s statuses dropped after %s attempts", n, attempt + 1)
            self.counts["statuses_dropped"] += n
            self.pending -= n
            return
        self.counts["retries"] += 1
        delay = min(cfg.webhook_retry_cap_s, cfg.webhook_retry_base_s * 2**attempt)
        await asyncio.sleep(delay)
        await self._post(body, n, attempt=attempt + 1)

    def stats(self) -> dict[str, Any]:
        return {**self.counts, "pending": self.pending}


def _envelope(
    batch: list[tuple[SentMessage, str, dict[str, Any]]], config: SimConfig
) -> dict[str, Any]:
    """Meta's envelope: one entry per WABA, one change per phone number and field.

    Statuses, messages and user_preferences name their user in the value's ``contacts[]``
    (see the module's sources), one entry per user.
    """
    entries: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for message, kind, item in batch:
        changes = entries.setdefault(message.waba_id, {})
        field = "user_preferences" if kind == "user_preferences" else "messages"
        change = changes.get((message.phone_number_id, field))
        if change is None:
            change = changes[(message.phone_number_id, field)] = {
                "field": field,
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {
                        "display_phone_number": message.display_phone_number,
                        "phone_number_id": message.phone_number_id,
                    },
                },
            }
        value = change["value"]
        value.setdefault(kind, []).append(item)
        contact = _contact_entry(message, kind, item, config)
        if contact is not None and contact not in value.get("contacts", []):
            value.setdefault("contacts", []).append(contact)
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {"id": waba_id, "changes": list(changes.values())}
            for waba_id, changes in entries.items()
        ],
    }


# Statuses that name their user in contacts[]: Meta leaves them off failed ones.
_STATUSES_WITH_CONTACTS = ("sent", "delivered", "read")


def _contact_entry(
    message: SentMessage, kind: str, item: dict[str, Any], config: SimConfig
) -> dict[str, Any] | None:
    """The ``contacts[]`` entry for the user an item is about, or ``None`` for none.

    ``{profile{name, username?}, wa_id?, user_id, parent_user_id?}``: ``wa_id`` only when
    the item shows the phone (a status's ``recipient_id``, a message's ``from``, a
    preference's ``wa_id``), the username for users who have one (username_recipients).
    """
    if kind == "statuses":
        if not config.webhook_user_ids or item.get("status") not in _STATUSES_WITH_CONTACTS:
            return None
        shows_phone = "recipient_id" in item
    elif kind in ("messages", "user_preferences"):
        shows_phone = "from" in item or "wa_id" in item
    else:
        return None
    recipient = message.recipient_id
    profile: dict[str, Any] = {"name": "Sim User"}
    if recipient in config.username_recipients:
        profile["username"] = username_for(recipient)
    contact: dict[str, Any] = {"profile": profile}
    if shows_phone:
        contact["wa_id"] = recipient
    contact["user_id"] = user_id_for(recipient)
    if config.webhook_parent_user_ids:
        contact["parent_user_id"] = parent_user_id_for(recipient)
    return contact


def _conversation_id(message: SentMessage) -> str:
    key = f"{message.phone_number_id}:{message.recipient_id}".encode()
    return hashlib.blake2b(key, digest_size=16).hexdigest()
