"""Clicks on tracked links: each stored before it is answered, many by one statement.

A tracked link is ``CLICK_BASE_URL/<token>`` (``whatsblast.core.click_tokens``: the
message's id and a MAC, checked without a lookup). A click is answered with a redirect to
the campaign's destination filled in for the recipient (``whatsblast.core.link_destinations``),
and only once the click is committed: a click a person was redirected for is never lost.

**Group commit.** A campaign's link is tapped by thousands of people within minutes of the
send, so a click must cost no more than one of the webhook's POSTs: one round trip shared
with every click waiting at that moment. Each request (a thread of the WSGI view, or the
ASGI event loop) hands its click to the process's ``ClickCommitter`` and waits; a committer
thread takes everything waiting and runs ``_BATCH_SQL`` once: one statement, its own
transaction (``batch_store``), that inserts the clicks of messages that exist and are
younger than ``CLICK_TOKEN_DAYS`` and returns for every click what its redirect needs (the
destination, the UTM switch, the campaign's name, the A/B arm, the contact's fields). Once
it is committed every waiting request is released. On an event loop the clicks of one
turn of the loop are handed over together (one lock, one wake-up, one timer for their
deadline), not one by one.

**What a click costs** (6 Dec 2026, the 2-core box: bench/clicks.py, cProfile of a web
process under it, EXPLAIN ANALYZE and a load of the statement alone). A click cost the web
process 170-230 µs of CPU against 100-120 µs for a webhook POST, and the endpoint carried
0.43-0.52 clicks per POST. On the event loop a fifth of a click went to rebuilding the
redirect; PostgreSQL planned the statement anew for each batch and checked three foreign
keys per click; each batch took three round trips (BEGIN, the statement, COMMIT). Now the
redirect is cut once per campaign arm (``_Redirect``: 1.6 µs a click instead of 11), the
committers prepare the statement (``CLICK_PREPARED_STATEMENTS``), ``Click`` keeps its
relations without database constraints (PostgreSQL: 77, then 48, then 36 µs a click), and
a batch is one round trip. A click costs 60-90 µs in the web process, less than a POST,
plus the access-log line gunicorn writes for every request but an accepted webhook POST
(whatsblast/observability/access_log.py), 50-70 µs: with it 0.66-0.93 clicks per POST
(four runs), with the clicks' lines left out as the POSTs' are 1.10 and 1.32 (two).

**Answers.** A token that is not ours (forged, mangled) never reaches the database; it,
a token of a message that does not exist, and one of a message created more than
``CLICK_TOKEN_DAYS`` ago go to ``CLICK_FALLBACK_URL`` and store nothing. When the click
cannot be stored (the database is down or slower than ``CLICK_STORE_TIMEOUT_S``, or more
than ``CLICK_MAX_PENDING`` clicks wait), the person cannot be sent to their destination
either: it is read in the same statement, and a redirect without the click stored would be
a click lost. They get ``ClicksUnavailable``, answered as a short "try again" page (503
with Retry-After), never a stack trace and never someone else's page; each such answer is
counted. A click answered 503 because its commit came too late may still be stored once the
statement finishes: a person who then taps again counts twice in the total, once in the
unique count.

**Preview fetchers.** WhatsApp and other apps fetch a link to draw its preview card; those
requests (and every HEAD) are stored too, marked ``is_preview``, and counted apart from
people's clicks (``is_preview_fetch``).

**Counters.** Outcomes are summed in the process and written to Redis
(``wb:metrics:clicks``, fields ``stored``, ``preview``, ``expired``, ``unknown``,
``forged``, ``unavailable``: ``CLICK_OUTCOMES``) by the committer thread at most every
``HOUSEKEEPING_INTERVAL_S``: never a Redis round trip on the event loop or per click.
``/metrics`` exports them as ``whatsblast_clicks_total{outcome=...}``.

**Settings** (whatsblast/settings.py): ``CLICK_MAX_PENDING``, ``CLICK_STORE_TIMEOUT_S``,
``CLICK_RETRY_AFTER_S``, ``CLICK_COMMITTERS``, ``CLICK_PREPARED_STATEMENTS``, read when
the process's committer is built (``committer()``).

A request already inside a transaction (a test, ``ATOMIC_REQUESTS``) stores inline, under a
savepoint: its commit belongs to its caller.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.db import Error as DjangoDatabaseError
from django.db import connection, transaction
from django.utils import timezone
from django.utils.encoding import iri_to_uri

from whatsblast.core.click_tokens import message_id_from_token
from whatsblast.core.counters import KEY_PREFIX, counters_add
from whatsblast.core.db import array_literal, array_text, bound_cursor, jsonb_value
from whatsblast.core.link_destinations import (
    PLACEHOLDER_RE,
    destination_url,
    link_destination_errors,
)
from whatsblast.core.waiters import waiters_release

logger = logging.getLogger(__name__)

CLICKS_KEY = f"{KEY_PREFIX}:clicks"
# The fields of CLICKS_KEY: what became of each request for a tracked link.
CLICK_OUTCOMES = ("stored", "preview", "expired", "unknown", "forged", "unavailable")
MAX_BATCH = 500  # clicks per statement
HOUSEKEEPING_INTERVAL_S = 0.05  # counters written at most this often per process
USER_AGENT_CHARS = 300  # Click.user_agent's max_length
VARIANT_LABELS = "ABCDE"  # Message.variant 0-4, as the A/B report names the arms


class ClicksUnavailable(Exception):
    """The click could not be stored, so it cannot be redirected: answer "try again"."""


class Overloaded(ClicksUnavailable):
    """More clicks wait for a commit than ``CLICK_MAX_PENDING``: shed at once."""


class NotStored(ClicksUnavailable):
    """The click was not committed within ``CLICK_STORE_TIMEOUT_S`` (or the statement failed)."""


# --- preview fetchers -------------------------------------------------------------------

# Link-preview fetchers and crawlers, by the token their User-Agent carries (matched
# case-insensitively, anywhere in the string). Where each comes from:
# - WhatsApp's own fetcher sends "WhatsApp/<version> <platform>" (e.g. "WhatsApp/2.23.18.78 i")
#   and Meta's shared "facebookexternalhit/1.1": opengraphplus.com/consumers/whatsapp/crawling.
#   Only a UA that *starts* with "WhatsApp/" is the fetcher (see _PREVIEW_PREFIXES).
# - facebookexternalhit, facebookcatalog: Meta Web Crawlers,
#   developers.facebook.com/docs/sharing/webmasters/web-crawlers/ ; Facebot: Meta's crawler
#   as facebook.com/externalhit_uatext.php and the same page have named it.
# - Twitterbot: X's Cards docs, "URL Crawling & Caching" (developer.x.com/en/docs/
#   twitter-for-websites/cards/guides/getting-started): "Twitterbot/1.0".
# - Slackbot: "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", api.slack.com/robots.
# - TelegramBot: "TelegramBot (like TwitterBot)", as Telegram's fetcher sends it (no vendor
#   page; listed by crawler directories, e.g. github.com/monperrus/crawler-user-agents).
# - Discordbot: "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
#   centinelanalytica.com/crawlers/discordbot.
# - LinkedInBot: "LinkedInBot/1.0 (compatible; Mozilla/5.0; ...)",
#   opengraphplus.com/consumers/linkedin/crawling and LinkedIn's Post Inspector.
# - Googlebot: developers.google.com/search/docs/crawling-indexing/overview-google-crawlers.
# - bingbot, BingPreview: bing.com/webmasters/help/which-crawlers-does-bing-use-8c184ec0.
# - Applebot: support.apple.com/en-us/HT204683 ("About Applebot").
# - SkypeUriPreview: "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
#   centinelanalytica.com/crawlers/skypeuripreview.
_PREVIEW_TOKENS = (
    "facebookexternalhit",
    "facebookcatalog",
    "facebot",
    "twitterbot",
    "slackbot",
    "telegrambot",
    "discordbot",
    "linkedinbot",
    "googlebot",
    "bingbot",
    "bingpreview",
    "applebot",
    "skypeuripreview",
)
_PREVIEW_PREFIXES = ("whatsapp/",)
# The generic marks machines give themselves ("...bot", "crawler", "spider", "preview").
# "bot" only at a word's end, and not in "CUBOT" (an Android phone brand people click from).
_GENERIC_RE = re.compile(r"(?<!cu)bot\b|crawl|spider|preview", re.IGNORECASE)
# No control characters in a stored User-Agent (a NUL would fail the whole batch's statement).
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# A campaign's clicks come from a few hundred distinct browsers and apps: what a User-Agent
# says is worked out once and remembered (the agents up to this length, so the cache stays
# a few megabytes whatever is sent).
_AGENT_CACHE_CHARS = 512


def is_preview_fetch(user_agent: str, method: str) -> bool:
    """Whether a request for a tracked link is a machine fetching it (a link preview, a
    crawler, a HEAD), not a person opening it.

    A request without a User-Agent counts as a machine: every browser sends one.
    """
    return method.upper() == "HEAD" or _agent_facts(user_agent)[0]


def _agent_facts(user_agent: str) -> tuple[bool, str]:
    """Whether ``user_agent`` is a preview fetcher's, and the text stored for it."""
    if len(user_agent) > _AGENT_CACHE_CHARS:
        return _agent_read(user_agent)
    return _agent_read_cached(user_agent)


def _agent_read(user_agent: str) -> tuple[bool, str]:
    agent = user_agent.strip().lower()
    preview = (
        not agent
        or agent.startswith(_PREVIEW_PREFIXES)
        or any(token in agent for token in _PREVIEW_TOKENS)
        or _GENERIC_RE.search(agent) is not None
    )
    return preview, _CONTROL_RE.sub("", user_agent)[:USER_AGENT_CHARS]


_agent_read_cached = functools.lru_cache(maxsize=4096)(_agent_read)


# --- the redirect ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What the batch statement read for a stored click: enough to build its redirect."""

    destination: str
    link_utm: bool
    campaign_name: str
    variant: int | None
    contact_fields: Mapping[str, str]


def location_of(target: Target | None) -> str:
    """The redirect for a stored click (``None``: unknown or expired, the fallback). A
    message without a campaign, a campaign without a destination, or a destination that is
    no longer valid also go to the fallback: never to anything but an http(s) page."""
    if target is None or not target.destination:
        return fallback_url()
    variant = target.variant
    redirect = _redirect(
        target.destination,
        utm=target.link_utm,
        campaign_name=target.campaign_name,
        variant_label=VARIANT_LABELS[variant] if variant is not None and 0 <= variant < 5
        else None,
    )  # fmt: skip
    if redirect is None:
        return fallback_url()
    try:
        return redirect.url(target.contact_fields)
    except ValueError:
        return fallback_url()


@dataclass(frozen=True)
class _Redirect:
    """A campaign arm's destination, checked and cut apart once for all its clicks.

    ``destination_url`` splits the URL, parses its query for the UTM keys it already has,
    slugs the campaign's name and quotes the whole result: the same work for every click
    of an arm, and a fifth of the event loop's time per click (cProfile of the web process
    under bench/clicks.py, 6 Dec 2026). Only the contact's fields differ from one click to
    the next, and each lands in the URL as ``quote(value, safe="")`` where its placeholder
    stood: so the URL is made once with a marker for each field, cut at the markers into
    ``pieces``, and a click's redirect is the pieces with its quoted values between them.
    ``pieces`` is ``None`` where that would not be exact (``_cuttable``): then every click
    is filled by ``destination_url`` itself. Each cut is checked against
    ``destination_url`` with a few hostile values when it is made (``_PROBES``).
    """

    destination: str
    utm: bool
    campaign_name: str
    variant_label: str | None
    pieces: tuple[str, ...] | None
    fields: tuple[str, ...]

    def url(self, contact_fields: Mapping[str, str]) -> str:
        if self.pieces is None:
            return destination_url(
                self.destination,
                contact_fields=contact_fields,
                campaign_name=self.campaign_name,
                variant_label=self.variant_label,
                utm=self.utm,
            )
        parts = [self.pieces[0]]
        for name, piece in zip(self.fields, self.pieces[1:], strict=True):
            parts.append(quote(contact_fields.get(name, ""), safe=""))
            parts.append(piece)
        return "".join(parts)


# Values a cut redirect is checked against destination_url with, once, when it is made:
# empty, every delimiter and escape a value could carry, a UTM key, non-ASCII.
_PROBES = ("", "a b/c?d=e&f#g;h+i%2F", "utm_source", "São Paulo/ü")


@functools.lru_cache(maxsize=1024)
def _redirect(
    destination: str, *, utm: bool, campaign_name: str, variant_label: str | None
) -> _Redirect | None:
    """The arm's ``_Redirect``, or ``None`` when its destination is not valid (fallback)."""
    if link_destination_errors(destination):
        return None
    slow = _Redirect(destination, utm, campaign_name, variant_label, None, ())
    if not _cuttable(destination, utm=utm):
        return slow
    names = tuple(dict.fromkeys(PLACEHOLDER_RE.findall(destination)))
    # Letters and digits only: quote() and iri_to_uri() leave a marker as it is, and no URL
    # delimiter is in it. Random, so that nothing else in the URL can be taken for one.
    stem = "wbm" + secrets.token_hex(8)
    markers = {name: f"{stem}{index:04d}z" for index, name in enumerate(names)}
    try:
        made = destination_url(
            destination,
            contact_fields=markers,
            campaign_name=campaign_name,
            variant_label=variant_label,
            utm=utm,
        )
    except ValueError:
        return slow
    if made.count(stem) != len(PLACEHOLDER_RE.findall(destination)):  # one per placeholder
        return slow
    cut = re.split(f"{stem}(\\d{{4}})z", made)
    redirect = _Redirect(
        destination,
        utm,
        campaign_name,
        variant_label,
        pieces=tuple(cut[0::2]),
        fields=tuple(names[int(index)] for index in cut[1::2]),
    )
    for probe in _PROBES:
        values = dict.fromkeys(names, probe)
        if redirect.url(values) != slow.url(values):  # destination_url changed its ways
            logger.warning(
                "tracked link %r filled click by click: cutting it was not exact", destination
            )
            return slow
    return redirect


def _cuttable(destination: str, *, utm: bool) -> bool:
    """Whether every field's quoted value lands where its placeholder stands, whatever the
    value, so that a redirect can be cut once (``_Redirect``).

    A quoted value is letters, digits, ``-._~`` and ``%XX``: no delimiter of a URL, so it
    never moves where the path, query or fragment begin or end, and ``iri_to_uri`` leaves it
    as it is. Two things still depend on the value: a path, query or fragment made of
    placeholders alone is there or not by whether the values are empty (``?`` and ``#``
    are dropped with an empty part), and with UTM parameters a query key made of a field
    could name one, which is then not added. Such destinations are filled click by click.
    """
    parts = urlsplit(destination)
    for part in (parts.path, parts.query, parts.fragment):
        if part and not PLACEHOLDER_RE.sub("", part):
            return False
    if utm:
        for pair in parts.query.split("&"):
            if PLACEHOLDER_RE.search(pair.partition("=")[0]):
                return False
    return True


def fallback_url() -> str:
    return iri_to_uri(str(settings.CLICK_FALLBACK_URL))


def contact_fields(*, name: str | None, phone: str | None, attributes: Any) -> dict[str, str]:
    """A contact's fields as text, as the launch renders them into parameters
    (``attributes ->> key``): strings as they are, numbers and booleans as JSON writes
    them, a null as "". ``name`` and ``phone`` win over attributes of the same name."""
    fields: dict[str, str] = {}
    if isinstance(attributes, dict):
        for key, value in attributes.items():
            fields[str(key)] = _attribute_text(value)
    fields["name"] = name or ""
    fields["phone"] = phone or ""
    return fields


def _attribute_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


# --- one click, and the group commit ------------------------------------------------------


@dataclass(eq=False)
class _Item:
    message_id: int
    clicked_at: datetime
    is_preview: bool
    user_agent: str
    # A thread waits on ``done``; a caller on an event loop on ``future``, resolved on that
    # loop by the committer. Each item has one of the two.
    done: threading.Event | None = None
    future: asyncio.Future[None] | None = None
    outcome: str = ""  # "stored" | "preview" | "expired" | "unknown", set by the statement
    target: Target | None = None
    failed: bool = False


# Every waiting click in one statement. RETURNING can only name the inserted table's
# columns, and a redirect needs the campaign's and the contact's, so the INSERT is a
# data-modifying CTE over ``found`` (the clicks whose message exists, each with whether it
# is still live) and the main SELECT reads the same ``found`` rows with the campaign and
# the contact. PostgreSQL runs the INSERT to completion whatever the SELECT reads; both see
# the same snapshot; the statement's commit (``batch_store``) makes the clicks durable
# before any is answered. A click whose message is missing has no row in ``found`` (nothing stored,
# nothing returned: "unknown"); one whose message was created more than CLICK_TOKEN_DAYS
# before the click is returned with live = false and is not inserted ("expired").
# Each lookup is a LATERAL subquery by primary key with LIMIT 1 (the key is unique, so the
# limit changes no result): the planner cannot flatten it into a join, so every click
# costs three index probes, never a hash join over the whole table (measured: with stale
# statistics the plain joins became sequential scans of every message and contact, once
# per batch). That shape is also why one plan fits every batch: the committers prepare the
# statement once per connection (``_prepared_here``), and after its first five runs
# PostgreSQL keeps one generic plan (pg_prepared_statements: generic_plans counts up).
# Planning it was most of what PostgreSQL spent on a small batch: 0.12-0.3 ms a batch
# against 0.3 ms executing 22 clicks (EXPLAIN ANALYZE); prepared, PostgreSQL's CPU per
# click fell from 77 to 48 µs (8 clicks a batch, 6 connections at once; 36 µs without the
# foreign keys, see delivery/models.py's Click).
_BATCH_SQL = """
WITH clicks AS (
    SELECT * FROM unnest(%s::bigint[], %s::timestamptz[], %s::boolean[], %s::text[])
        WITH ORDINALITY AS u(message_id, clicked_at, is_preview, user_agent, n)
),
found AS (
    SELECT c.n, c.clicked_at, c.is_preview, c.user_agent, m.id AS message_id,
           m.campaign_id, m.contact_id, m.variant,
           m.created_at >= c.clicked_at - make_interval(days => %s::int) AS live
      FROM clicks AS c
     CROSS JOIN LATERAL (
           SELECT id, campaign_id, contact_id, variant, created_at
             FROM delivery_message WHERE id = c.message_id LIMIT 1
           ) AS m
),
stored AS (
    INSERT INTO delivery_click
        (message_id, campaign_id, contact_id, clicked_at, is_preview, user_agent)
    SELECT message_id, campaign_id, contact_id, clicked_at, is_preview, user_agent
      FROM found
     WHERE live
    RETURNING id
)
SELECT f.n, f.live, cp.link_destination, cp.link_utm, cp.name,
       COALESCE(f.variant, cp.winner), ct.name, ct.phone, ct.attributes
  FROM found AS f
  LEFT JOIN LATERAL (
       -- An A/B test's remainder row has no arm of its own: it was sent the winner, and
       -- its link says so (utm_content) as the winning arm's did.
       SELECT k.link_destination, k.link_utm, k.name,
              (SELECT v.position FROM campaigns_campaignvariant AS v
                WHERE v.id = k.ab_winner_id) AS winner
         FROM campaigns_campaign AS k WHERE k.id = f.campaign_id AND f.live LIMIT 1
       ) AS cp ON true
  LEFT JOIN LATERAL (
       SELECT name, phone, attributes
         FROM campaigns_contact WHERE id = f.contact_id AND f.live LIMIT 1
       ) AS ct ON true
"""


class ClickCommitter:
    """One process's committer threads and the clicks waiting for them (as the webhook's
    ``GroupCommitter``: while one thread waits for its commit to reach the disk, the other
    inserts the next batch). Each thread keeps its own database connection."""

    def __init__(
        self, *, max_pending: int, wait_s: float, committers: int = 2, prepared: bool = True
    ) -> None:
        self.max_pending = max_pending
        self.wait_s = wait_s
        self.committers = committers
        self.prepared = prepared
        self.batches_committed = 0  # statements that ran: a figure for tests and benches
        self._waiting: deque[_Item] = deque()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._counts: Counter[str] = Counter()  # outcomes not yet written to Redis
        self._housekept_at = 0.0
        # Clicks of each event loop's current turn, handed over together (``_loop_admit``).
        self._inboxes: dict[asyncio.AbstractEventLoop, list[_Item]] = {}

    def store(self, item: _Item) -> None:
        """Store ``item`` durably (its ``outcome`` and ``target`` filled in), from a thread."""
        item.done = done = threading.Event()
        with self._cond:
            if not self._admit([item]):
                self._counts["unavailable"] += 1
                raise Overloaded
        if not done.wait(self.wait_s) or item.failed:
            self.count("unavailable")
            raise NotStored

    async def store_async(self, item: _Item) -> None:
        """``store`` for a caller on an event loop, which serves other requests meanwhile.

        The click joins the loop's inbox; once per turn of the loop the inbox is handed to
        the committers at once (``_loop_admit``) with one timer for the whole group's
        deadline. Per click that leaves a future and an append: ``asyncio.wait_for`` (a
        second future, a timer, a callback) and a lock and wake-up per request were 13 % of
        the click handler's time on the loop (cProfile, bench/clicks.py).
        """
        loop = asyncio.get_running_loop()
        item.future = future = loop.create_future()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            inbox = self._inboxes[loop] = []
            loop.call_soon(self._loop_admit, loop)
        inbox.append(item)
        await future  # raises Overloaded (shed) or NotStored (too late)
        if item.failed:
            self.count("unavailable")
            raise NotStored

    def count(self, outcome: str, n: int = 1) -> None:
        """Add to the process's counts; a committer thread writes them to Redis soon."""
        with self._cond:
            self._counts[outcome] += n
            self._ensure_threads()
            self._cond.notify()

    def waiting_count(self) -> int:
        with self._cond:
            return len(self._waiting)

    def stop(self, timeout: float = 5.0) -> None:
        """Let the committers finish what waits, then end them and close their connections."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def _loop_admit(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``: hand its inbox to the committers, shedding what does not fit."""
        items = self._inboxes.pop(loop)
        with self._cond:
            room = max(0, self.max_pending - len(self._waiting))
            admitted, shed = items[:room], items[room:]
            self._admit(admitted)
            self._counts["unavailable"] += len(shed)
        for item in shed:
            if item.future is not None and not item.future.done():  # not cancelled meanwhile
                item.future.set_exception(Overloaded())
        if admitted:
            futures = [item.future for item in admitted if item.future is not None]
            loop.call_later(self.wait_s, self._loop_expire, futures)

    def _loop_expire(self, futures: list[asyncio.Future[None]]) -> None:
        """On the loop, ``wait_s`` after a group was admitted: who is still waiting, 503."""
        late = 0
        for future in futures:
            if not future.done():
                future.set_exception(NotStored())
                late += 1
        if late:
            self.count("unavailable", late)

    def _admit(self, items: list[_Item]) -> bool:
        """Queue ``items`` for the committers (the caller holds ``_cond``); ``False`` when
        they would pass ``max_pending``."""
        if not items:
            return True
        if len(self._waiting) + len(items) > self.max_pending:
            return False
        self._waiting.extend(items)
        self._ensure_threads()
        self._cond.notify()
        return True

    def _ensure_threads(self) -> None:
        if self._stopping:
            return
        self._threads = [t for t in self._threads if t.is_alive()]
        while len(self._threads) < self.committers:
            thread = threading.Thread(
                target=self._run, name=f"click-committer-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._waiting and not self._stopping:
                        if self._counts:  # idle with counts to write: write them soon
                            self._cond.wait(HOUSEKEEPING_INTERVAL_S)
                            break
                        self._cond.wait()
                    if not self._waiting and self._stopping:
                        break
                    batch = [
                        self._waiting.popleft() for _ in range(min(MAX_BATCH, len(self._waiting)))
                    ]
                if batch:
                    self._commit(batch)
                self._housekeep()
        finally:
            self._housekeep(force=True)
            _connection_drop()

    def _commit(self, batch: list[_Item]) -> None:
        try:
            if self.prepared:
                _prepared_here()
            batch_store(batch)
        except Exception as exc:  # the database away or failing: nobody may wait forever
            if isinstance(exc, DjangoDatabaseError):
                logger.warning("click batch of %s not stored (%s): answered 503", len(batch), exc)
            else:
                logger.exception("click batch of %s not stored: answered 503", len(batch))
            _connection_drop()  # the next batch reconnects
            for item in batch:
                item.failed = True
            waiters_release(batch)
            return
        waiters_release(batch)
        with self._cond:
            self.batches_committed += 1
            self._counts.update(item.outcome for item in batch)

    def _housekeep(self, *, force: bool = False) -> None:
        now = time.monotonic()
        with self._cond:
            if not self._counts or (
                not force and now - self._housekept_at < HOUSEKEEPING_INTERVAL_S
            ):
                return
            self._housekept_at = now
            counts, self._counts = self._counts, Counter()
        counters_add(("int", CLICKS_KEY, outcome, n) for outcome, n in counts.items() if n)


def _prepared_here() -> None:
    """Have this thread's connection prepare a statement the first time it runs it.

    Only the committer threads call this: their connections run nothing but ``_BATCH_SQL``
    (through ``bound_cursor``; Django's own cursors bind on the client and never prepare).
    psycopg keeps the prepared statement with the connection, and a new connection (after
    ``_connection_drop``) prepares it again. Django leaves preparing off for every other
    connection.
    """
    connection.ensure_connection()
    raw = connection.connection
    if raw is not None and raw.prepare_threshold != 0:
        raw.prepare_threshold = 0


def _connection_drop() -> None:
    """Close this thread's connection, whatever state the server left it in."""
    try:
        connection.close()
    except DjangoDatabaseError:
        logger.debug("click committer's connection was already broken")


def batch_store(batch: list[_Item]) -> None:
    """Run ``_BATCH_SQL`` for ``batch``, committed by the time it returns; each item's
    ``outcome`` and ``target`` filled in.

    On an autocommit connection (the committers') the statement is its own transaction:
    PostgreSQL commits it at the end of the exchange and answers only once the commit is on
    disk (psycopg returns with the server's ReadyForQuery, which follows the commit), so
    the clicks are as durable as after a COMMIT, for one round trip where BEGIN, the
    statement and COMMIT took three. Each round trip also costs the committer thread the
    GIL back from the busy event loop. Inside a caller's transaction (a test,
    ``ATOMIC_REQUESTS``) it runs under a savepoint, and the caller commits.
    """
    params: list[str | int] = [
        array_literal(str(item.message_id) for item in batch),
        array_literal(array_text(item.clicked_at.isoformat()) for item in batch),
        array_literal("t" if item.is_preview else "f" for item in batch),
        array_literal(array_text(item.user_agent) for item in batch),
        int(settings.CLICK_TOKEN_DAYS),
    ]
    alone = connection.get_autocommit() and not connection.in_atomic_block
    with nullcontext() if alone else transaction.atomic(), bound_cursor() as cursor:
        cursor.execute(_BATCH_SQL, params)
        rows = cursor.fetchall()
    for item in batch:
        item.outcome = "unknown"
    for n, live, destination, link_utm, name, variant, c_name, c_phone, attributes in rows:
        item = batch[int(n) - 1]  # WITH ORDINALITY counts from 1
        if not live:
            item.outcome = "expired"
            continue
        item.outcome = "preview" if item.is_preview else "stored"
        item.target = Target(
            destination=destination or "",
            link_utm=bool(link_utm),
            campaign_name=name or "",
            variant=variant,
            contact_fields=contact_fields(
                name=c_name, phone=c_phone, attributes=jsonb_value(attributes)
            ),
        )


# --- what callers use ----------------------------------------------------------------------


def click_location(token: str, *, user_agent: str, method: str) -> str:
    """Where a click on ``token`` goes, once it is stored (the threaded view).

    Grouped with other requests' clicks when the request is autocommit, inline (under a
    savepoint) when it runs inside a transaction already. Raises ``ClicksUnavailable``.
    """
    item = _item_for(token, user_agent=user_agent, method=method)
    if item is None:
        if connection.in_atomic_block:
            counters_add([("int", CLICKS_KEY, "forged", 1)])
        else:
            committer().count("forged")
        return fallback_url()
    if connection.in_atomic_block:
        try:
            batch_store([item])
        except DjangoDatabaseError as exc:
            logger.warning("click not stored (%s): answered 503", exc)
            counters_add([("int", CLICKS_KEY, "unavailable", 1)])
            raise NotStored from exc
        counters_add([("int", CLICKS_KEY, item.outcome, 1)])
    else:
        committer().store(item)
    return location_of(item.target)


async def click_location_async(token: str, *, user_agent: str, method: str) -> str:
    """``click_location`` from an event loop: always grouped (the loop holds no
    transaction), and nothing touches the database or Redis from the loop."""
    item = _item_for(token, user_agent=user_agent, method=method)
    if item is None:
        committer().count("forged")
        return fallback_url()
    await committer().store_async(item)
    return location_of(item.target)


def _item_for(token: str, *, user_agent: str, method: str) -> _Item | None:
    message_id = message_id_from_token(token)
    if message_id is None:
        return None
    preview, stored_agent = _agent_facts(user_agent)
    return _Item(
        message_id=message_id,
        clicked_at=timezone.now(),
        is_preview=preview or method.upper() == "HEAD",
        user_agent=stored_agent,
    )


_committer: ClickCommitter | None = None
_committer_lock = threading.Lock()


def committer() -> ClickCommitter:
    """The process's committer, built from the CLICK_* settings on first use."""
    global _committer
    with _committer_lock:
        if _committer is None:
            _committer = ClickCommitter(
                max_pending=int(settings.CLICK_MAX_PENDING),
                wait_s=float(settings.CLICK_STORE_TIMEOUT_S),
                committers=int(settings.CLICK_COMMITTERS),
                prepared=bool(settings.CLICK_PREPARED_STATEMENTS),
            )
        return _committer


def committer_stop() -> None:
    """Stop the process's committer, if one started (tests; a clean shutdown)."""
    global _committer
    with _committer_lock:
        if _committer is not None:
            _committer.stop()
            _committer = None


def retry_after_s() -> int:
    """What Retry-After says when a click could not be stored."""
    return int(settings.CLICK_RETRY_AFTER_S)


# --- the report's readers ------------------------------------------------------------------


@dataclass(frozen=True)
class ClickCounts:
    total: int = 0  # people's clicks, each tap counted
    unique: int = 0  # distinct messages people clicked (one recipient, one message)
    previews: int = 0  # preview fetchers' and HEAD requests, apart from people


# One pass over the campaign's clicks through click_campaign_message_idx (campaign,
# message): the index leads with the campaign, so only its clicks are read, and count
# DISTINCT message_id reads the message from the same entries. FILTER splits people from
# preview fetchers in the same pass. A click whose message was deleted since (message_id
# SET NULL) still counts in the total, not in the unique count.
_CAMPAIGN_SQL = """
SELECT count(*) FILTER (WHERE NOT k.is_preview),
       count(DISTINCT k.message_id) FILTER (WHERE NOT k.is_preview),
       count(*) FILTER (WHERE k.is_preview)
  FROM delivery_click AS k
 WHERE k.campaign_id = %s
"""

# The same per A/B arm: the arm is the message's (Message.variant), joined by its primary
# key; a click whose message is gone falls under None with the campaign's arm-less rows.
_BY_VARIANT_SQL = """
SELECT m.variant,
       count(*) FILTER (WHERE NOT k.is_preview),
       count(DISTINCT k.message_id) FILTER (WHERE NOT k.is_preview),
       count(*) FILTER (WHERE k.is_preview)
  FROM delivery_click AS k
  LEFT JOIN delivery_message AS m ON m.id = k.message_id
 WHERE k.campaign_id = %s
 GROUP BY m.variant
"""

# People's clicks per message, for the export: the ids travel as one array (an export
# asks for thousands at a time) and each is looked up through the message foreign key's
# index; messages nobody clicked return no row.
_PER_MESSAGE_SQL = """
SELECT k.message_id, count(*)
  FROM delivery_click AS k
 WHERE k.message_id = ANY(%s::bigint[]) AND NOT k.is_preview
 GROUP BY k.message_id
"""


def campaign_clicks(campaign_id: int) -> ClickCounts:
    """``campaign_id``'s clicks: people's taps, distinct messages tapped, preview fetches."""
    with connection.cursor() as cursor:
        cursor.execute(_CAMPAIGN_SQL, [campaign_id])
        total, unique, previews = cursor.fetchone() or (0, 0, 0)
    return ClickCounts(total=total, unique=unique, previews=previews)


def campaign_clicks_by_variant(campaign_id: int) -> dict[int | None, ClickCounts]:
    """``campaign_clicks`` per A/B arm (``Message.variant``; ``None``: no test, or the
    remainder sent the winner). Arms nobody clicked are absent."""
    with connection.cursor() as cursor:
        cursor.execute(_BY_VARIANT_SQL, [campaign_id])
        return {
            variant: ClickCounts(total=total, unique=unique, previews=previews)
            for variant, total, unique, previews in cursor.fetchall()
        }


def message_click_counts(message_ids: Iterable[int]) -> dict[int, int]:
    """People's clicks per message of ``message_ids`` (preview fetches left out); a message
    nobody clicked is absent (read it as 0)."""
    ids = [int(i) for i in message_ids]
    if not ids:
        return {}
    with bound_cursor() as cursor:
        cursor.execute(_PER_MESSAGE_SQL, [array_literal(str(i) for i in ids)])
        return {int(message_id): int(n) for message_id, n in cursor.fetchall()}
