"""Clicks on tracked links (delivery/engagement/clicks.py, whatsblast/views/clicks*.py).

Against the real PostgreSQL and Redis: a click through the Django view (inline inside the
test's transaction, and grouped by the real committer threads in autocommit), through the
ASGI application on a real event loop, and through gunicorn over real HTTP. The database
"going away" is real too: the committer's session is terminated by the server; a slow one
is a lock another session holds on the clicks table.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import redis
import requests
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from campaigns.models import Campaign
from delivery.engagement import clicks as clicks_module
from delivery.engagement.clicks import (
    CLICKS_KEY,
    ClickCounts,
    Target,
    campaign_clicks,
    campaign_clicks_by_variant,
    committer,
    committer_stop,
    is_preview_fetch,
    location_of,
    message_click_counts,
)
from delivery.models import Click, Message
from tests.factories import make_campaign, make_contact, make_message
from tests.observability.support import scrape
from tests.observability.test_deploy import production_env, web_process
from tests.webhooks.test_asgi import request
from whatsblast.core.click_tokens import click_token
from whatsblast.core.link_destinations import destination_url
from whatsblast.core.processes import service_environment

FALLBACK = "https://fallback.example.org/"
BROWSER = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Mobile Safari/537.36"
)
WHATSAPP_PREVIEW = "WhatsApp/2.24.12.78 A"


@pytest.fixture(autouse=True)
def click_settings(settings: Any) -> Iterator[None]:
    settings.CLICK_FALLBACK_URL = FALLBACK
    settings.CLICK_TOKEN_DAYS = 90
    committer_stop()  # each test's committer is built from its own settings
    yield
    committer_stop()


def campaign_with_message(
    *,
    destination: str = "https://shop.example.com/sale/{{city}}?who={{name}}",
    variant: int | None = None,
    **campaign_fields: Any,
) -> tuple[Campaign, Message]:
    campaign = make_campaign(
        name="Summer Sale", link_destination=destination, link_utm=True, **campaign_fields
    )
    contact = make_contact(name="Zoë & Co", attributes={"city": "São Paulo/Centro", "tier": 2})
    message = make_message(campaign=campaign, contact=contact, variant=variant)
    return campaign, message


def click(client: Client, token: str, *, agent: str = BROWSER, method: str = "get") -> Any:
    return getattr(client, method)(f"/c/{token}", headers={"user-agent": agent})


def counted(conn: redis.Redis) -> dict[str, int]:
    raw: dict[bytes, bytes] = conn.hgetall(CLICKS_KEY)  # type: ignore[assignment]
    return {k.decode(): int(v) for k, v in raw.items()}


# --- the Django view, inside the test's transaction (stored inline) -------------------------


@pytest.mark.django_db
def test_a_click_is_stored_and_redirected_to_the_filled_destination(
    redis_conn: redis.Redis,
) -> None:
    campaign, message = campaign_with_message(variant=1)
    answer = click(Client(), click_token(message.id))

    assert answer.status_code == 302
    location = urlsplit(answer["Location"])
    assert (location.scheme, location.netloc) == ("https", "shop.example.com")
    assert location.path == "/sale/S%C3%A3o%20Paulo%2FCentro"
    assert parse_qsl(location.query) == [
        ("who", "Zoë & Co"),
        ("utm_source", "whatsapp"),
        ("utm_medium", "message"),
        ("utm_campaign", "summer-sale"),
        ("utm_content", "B"),
    ]
    assert answer["Cache-Control"] == "no-store"
    assert answer["Referrer-Policy"] == "no-referrer"
    assert answer.content == b""

    stored = Click.objects.get()
    assert (stored.message_id, stored.campaign_id, stored.contact_id) == (
        message.id,
        campaign.id,
        message.contact_id,
    )
    assert stored.is_preview is False
    assert stored.user_agent == BROWSER
    assert abs((timezone.now() - stored.clicked_at).total_seconds()) < 5
    assert counted(redis_conn) == {"stored": 1}


@pytest.mark.django_db
def test_a_preview_fetcher_is_stored_as_a_preview_and_counted_apart() -> None:
    campaign, message = campaign_with_message()
    token = click_token(message.id)
    client = Client()
    assert click(client, token, agent=WHATSAPP_PREVIEW).status_code == 302
    assert click(client, token, agent="facebookexternalhit/1.1").status_code == 302
    head = click(client, token, method="head")  # a browser's UA, but a HEAD
    assert head.status_code == 302
    assert head["Location"].startswith("https://shop.example.com/sale/")
    assert click(client, token).status_code == 302

    assert Click.objects.filter(is_preview=True).count() == 3
    assert campaign_clicks(campaign.id) == ClickCounts(total=1, unique=1, previews=3)


@pytest.mark.django_db
def test_repeated_clicks_count_every_tap_in_the_total_and_each_message_once_in_unique() -> None:
    campaign, first = campaign_with_message(variant=0)
    second = make_message(campaign=campaign, contact=make_contact(), variant=1)
    third = make_message(campaign=campaign, contact=make_contact(), variant=1)
    untouched = make_message(campaign=campaign, contact=make_contact(), variant=0)
    other_campaign, elsewhere = campaign_with_message()
    client = Client()
    for message, taps in ((first, 3), (second, 2), (third, 1), (elsewhere, 4)):
        for _ in range(taps):
            assert click(client, click_token(message.id)).status_code == 302
    click(client, click_token(third.id), agent="Mozilla/5.0 (compatible; Discordbot/2.0)")

    assert campaign_clicks(campaign.id) == ClickCounts(total=6, unique=3, previews=1)
    assert campaign_clicks(other_campaign.id) == ClickCounts(total=4, unique=1, previews=0)
    assert campaign_clicks_by_variant(campaign.id) == {
        0: ClickCounts(total=3, unique=1, previews=0),
        1: ClickCounts(total=3, unique=2, previews=1),
    }
    counts = message_click_counts([first.id, second.id, third.id, untouched.id, elsewhere.id])
    assert counts == {first.id: 3, second.id: 2, third.id: 1, elsewhere.id: 4}
    assert message_click_counts([]) == {}
    assert campaign_clicks(10**9) == ClickCounts(0, 0, 0)


@pytest.mark.django_db
def test_forged_unknown_and_expired_tokens_go_to_the_fallback_and_store_nothing(
    redis_conn: redis.Redis, settings: Any
) -> None:
    _, message = campaign_with_message()
    client = Client()
    token = click_token(message.id)
    neighbour = click_token(message.id + 1)[: len(token)]
    forged = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),  # one character of the MAC changed
        neighbour[:-12] + token[-12:],  # the next id with this message's MAC
        "nonsense",
        "",
    ]
    for bad in forged:
        answer = client.get(f"/c/{bad}") if bad else client.get("/c/x")
        assert answer.status_code == 302, bad
        assert answer["Location"] == FALLBACK
        assert answer["Cache-Control"] == "no-store"

    unknown = click_token(message.id + 1000)  # a good MAC, but no such message
    assert click(client, unknown)["Location"] == FALLBACK

    Message.objects.filter(id=message.id).update(created_at=timezone.now() - timedelta(days=91))
    assert click(client, token)["Location"] == FALLBACK
    settings.CLICK_TOKEN_DAYS = 92  # the same message is within a longer life
    assert click(client, token)["Location"].startswith("https://shop.example.com/")

    assert Click.objects.count() == 1
    assert counted(redis_conn) == {"forged": 4, "unknown": 1, "expired": 1, "stored": 1}


@pytest.mark.django_db
def test_a_message_without_a_usable_destination_goes_to_the_fallback_but_the_click_counts() -> None:
    campaign, message = campaign_with_message(destination="")
    assert click(Client(), click_token(message.id))["Location"] == FALLBACK
    Campaign.objects.filter(id=campaign.id).update(link_destination="javascript:alert(1)")
    assert click(Client(), click_token(message.id))["Location"] == FALLBACK
    assert campaign_clicks(campaign.id) == ClickCounts(total=2, unique=1, previews=0)


@pytest.mark.django_db
def test_other_methods_are_refused_with_405_and_nothing_is_stored() -> None:
    _, message = campaign_with_message()
    client = Client(enforce_csrf_checks=True)
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)(f"/c/{click_token(message.id)}").status_code == 405
    assert not Click.objects.exists()


@pytest.mark.parametrize(
    ("agent", "method", "preview"),
    [
        (BROWSER, "GET", False),
        (BROWSER, "HEAD", True),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15",
            "GET",
            False,
        ),
        ("Mozilla/5.0 (Linux; Android 9; CUBOT X19) AppleWebKit/537.36 Chrome/120", "GET", False),
        ("WhatsApp/2.23.18.78 i", "GET", True),
        ("Mozilla/5.0 (Linux) WhatsApp/2.0", "GET", False),  # not the fetcher's own UA
        ("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "GET", True),
        ("Mozilla/5.0 (compatible; Facebot)", "GET", True),
        ("Mozilla/5.0 (compatible; Twitterbot/1.0)", "GET", True),
        ("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "GET", True),
        ("TelegramBot (like TwitterBot)", "GET", True),
        ("Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", "GET", True),
        ("LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient)", "GET", True),
        ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "GET", True),
        ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "GET", True),
        ("Mozilla/5.0 (Macintosh) Version/8.0.2 Safari/600.2.5 (Applebot/0.1)", "GET", True),
        ("Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5", "GET", True),
        ("SomeCrawler/3.1", "GET", True),
        ("acme-spider", "GET", True),
        ("", "GET", True),
    ],
)
def test_preview_fetchers_are_told_from_people(agent: str, method: str, preview: bool) -> None:
    assert is_preview_fetch(agent, method) is preview


# --- grouped by the committer threads (autocommit) ----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_clicks_share_statements_and_each_is_stored_before_its_answer(
    redis_conn: redis.Redis,
) -> None:
    campaign, _ = campaign_with_message()
    messages = [make_message(campaign=campaign, contact=make_contact()) for _ in range(30)]

    async def flood() -> list[Any]:
        return await asyncio.gather(
            *[
                request("GET", f"/c/{click_token(m.id)}", headers={"user-agent": BROWSER})
                for m in messages
            ]
        )

    answers = asyncio.run(flood())
    assert [a.status for a in answers] == [302] * 30
    assert all(a.headers["location"].startswith("https://shop.example.com/") for a in answers)
    # Answered only once committed: every row is there the moment the answers are.
    assert Click.objects.filter(is_preview=False).count() == 30
    assert committer().batches_committed < 30  # grouped, not one statement per click
    committer_stop()  # writes the counts it holds
    assert counted(redis_conn) == {"stored": 30}


@pytest.mark.django_db(transaction=True)
def test_the_asgi_path_redirects_heads_previews_and_leaves_other_methods_to_django() -> None:
    campaign, message = campaign_with_message(variant=4)
    token = click_token(message.id)

    got = asyncio.run(request("GET", f"/c/{token}", headers={"user-agent": BROWSER}))
    assert got.status == 302
    assert got.headers["cache-control"] == "no-store"
    assert got.headers["referrer-policy"] == "no-referrer"
    assert got.headers["content-length"] == "0" and got.body == b""
    assert dict(parse_qsl(urlsplit(got.headers["location"]).query))["utm_content"] == "E"

    head = asyncio.run(request("HEAD", f"/c/{token}"))
    assert head.status == 302 and head.body == b""
    forged = asyncio.run(request("GET", "/c/not-a-token", headers={"user-agent": BROWSER}))
    assert (forged.status, forged.headers["location"]) == (302, FALLBACK)
    # Any other method is Django's: 405, and it passed through the middleware.
    posted = asyncio.run(request("POST", f"/c/{token}"))
    assert posted.status == 405
    assert posted.headers["x-frame-options"] == "DENY"

    assert campaign_clicks(campaign.id) == ClickCounts(total=1, unique=1, previews=1)


@pytest.mark.django_db(transaction=True)
def test_a_click_on_the_ab_remainder_carries_the_winners_label() -> None:
    from campaigns.models import CampaignVariant

    campaign, arm_row = campaign_with_message(variant=0)
    rest_row = make_message(campaign=campaign, contact=make_contact(name="Rui"))
    first = asyncio.run(request("GET", f"/c/{click_token(rest_row.id)}"))
    assert "utm_content" not in dict(parse_qsl(urlsplit(first.headers["location"]).query))
    winner = CampaignVariant.objects.create(
        campaign=campaign, position=1, template=campaign.template, param_mapping={}
    )
    Campaign.objects.filter(pk=campaign.pk).update(ab_test_percent=20, ab_winner=winner)
    committer_stop()  # the redirect cut once per arm is the committer's: a fresh one
    for message, label in ((rest_row, "B"), (arm_row, "A")):
        got = asyncio.run(request("GET", f"/c/{click_token(message.id)}"))
        assert dict(parse_qsl(urlsplit(got.headers["location"]).query))["utm_content"] == label


@pytest.mark.django_db(transaction=True)
def test_with_the_database_gone_a_click_gets_a_plain_503_and_the_next_one_works(
    redis_conn: redis.Redis, settings: Any
) -> None:
    settings.CLICK_COMMITTERS = 1
    settings.CLICK_RETRY_AFTER_S = 3
    campaign, message = campaign_with_message()
    token = click_token(message.id)
    client = Client()
    assert click(client, token).status_code == 302  # the committer's connection is open

    # The server ends every other session: the committer's connection is dead.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and other_sessions() > 0:
        time.sleep(0.05)

    down = click(client, token)
    assert down.status_code == 503
    assert down["Retry-After"] == "3"
    assert down["Content-Type"].startswith("text/plain")
    assert down.content.decode() == (
        "This link could not be opened just now. Please try again in a moment.\n"
    )
    assert "Location" not in down
    # The committer dropped the dead connection: the next batch reconnects, on either path.
    back_async = asyncio.run(request("GET", f"/c/{token}", headers={"user-agent": BROWSER}))
    assert back_async.status == 302
    again = click(client, token)
    assert again.status_code == 302
    assert again["Location"].startswith("https://shop.example.com/")
    assert campaign_clicks(campaign.id).total == 3  # the 503 stored nothing
    committer_stop()
    assert counted(redis_conn) == {"stored": 3, "unavailable": 1}


def other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_past_the_admission_limit_clicks_are_answered_503_at_once(settings: Any) -> None:
    settings.CLICK_MAX_PENDING = 0  # nothing may wait: every grouped click is shed
    _, message = campaign_with_message()
    started = time.monotonic()
    answer = click(Client(), click_token(message.id))
    assert answer.status_code == 503 and answer["Retry-After"] == "2"
    assert time.monotonic() - started < 1.0
    assert not Click.objects.exists()


# --- the web process as deployed, over real HTTP ----------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorn_answers_clicks_over_http_from_its_event_loop(
    tmp_path: Path, settings: Any
) -> None:
    env = production_env(
        ALLOWED_HOSTS="127.0.0.1",
        **service_environment(),
        STATIC_ROOT=str(tmp_path / "static"),
        GUNICORN_WORKERS="1",
        CLICK_FALLBACK_URL=FALLBACK,
        LOG_FORMAT="text",
    )
    settings.SECRET_KEY = env["SECRET_KEY"]  # the tokens are the web process's
    campaign, message = campaign_with_message(variant=2)
    token = click_token(message.id)
    with web_process(tmp_path, env) as (url, _log):
        # Plain HTTP and no proxy header: Django would send this to HTTPS first; the click
        # path is answered on the loop, before any middleware.
        got = requests.get(
            f"{url}/c/{token}", headers={"User-Agent": BROWSER}, allow_redirects=False, timeout=10
        )
        head = requests.head(
            f"{url}/c/{token}",
            headers={"User-Agent": WHATSAPP_PREVIEW},
            allow_redirects=False,
            timeout=10,
        )
        forged = requests.get(f"{url}/c/{token[:-2]}xx", allow_redirects=False, timeout=10)
    assert got.status_code == 302
    assert got.headers["Cache-Control"] == "no-store"
    assert got.headers["Referrer-Policy"] == "no-referrer"
    assert got.content == b""
    location = urlsplit(got.headers["Location"])
    assert location.netloc == "shop.example.com"
    assert dict(parse_qsl(location.query))["utm_content"] == "C"
    assert head.status_code == 302 and head.headers["Location"] == got.headers["Location"]
    assert (forged.status_code, forged.headers["Location"]) == (302, FALLBACK)
    assert campaign_clicks(campaign.id) == ClickCounts(total=1, unique=1, previews=1)


# --- the redirect, cut once per campaign arm ------------------------------------------------

CUT_DESTINATIONS = [
    "https://shop.example.com/sale/{{city}}?who={{name}}",
    "https://shop.example.com/{{city}}/{{city}}/x?a={{tier}}&b=1#top-{{name}}",
    "https://shop.example.com/p?utm_source=sms&c={{city}}",  # a UTM key of its own
    "https://shop.example.com/p?q=%2F{{name}}%20&=x",  # escapes, a key-less pair
    "https://café.example/ü/{{name}}?x=ä",  # IDNA host, non-ASCII text
    "https://shop.example.com:8443/{{missing}}",  # a field the contact lacks
    "http://shop.example.com",  # no field at all
]
# Where a value decides the URL's shape, filled click by click: always (True), or only with
# UTM parameters (False), where a query key made of a field could name one.
UNCUT_DESTINATIONS = {
    "https://shop.example.com/p?{{name}}": True,  # the whole query
    "https://shop.example.com/p#{{name}}": True,  # the whole fragment
    "https://shop.example.com/p?{{name}}=1&x=2": False,  # a query key
    "https://shop.example.com/p?utm_{{tier}}=1": False,  # part of one
}
VALUES = ["", "Zoë & Co", "a b/c?d=e&f#g;h+i%2F", "utm_source", "São Paulo/Centro", "%", "x" * 300]


@pytest.mark.parametrize("destination", [*CUT_DESTINATIONS, *UNCUT_DESTINATIONS])
@pytest.mark.parametrize("utm", [True, False])
@pytest.mark.parametrize(("campaign_name", "variant"), [("Black Friday!", 1), ("セール", None)])
def test_a_redirect_is_exactly_what_destination_url_makes_for_any_value(
    destination: str, utm: bool, campaign_name: str, variant: int | None
) -> None:
    label = None if variant is None else "ABCDE"[variant]
    for value in VALUES:
        fields = {"name": value, "city": value[::-1], "tier": value.upper(), "phone": "+4915"}
        target = Target(destination, utm, campaign_name, variant, fields)
        expected = destination_url(
            destination,
            contact_fields=fields,
            campaign_name=campaign_name,
            variant_label=label,
            utm=utm,
        )
        assert location_of(target) == expected, value
        assert expected.isascii()
    redirect = clicks_module._redirect(
        destination, utm=utm, campaign_name=campaign_name, variant_label=label
    )
    assert redirect is not None
    cut = destination in CUT_DESTINATIONS or not (UNCUT_DESTINATIONS[destination] or utm)
    assert (redirect.pieces is not None) is cut


def test_an_invalid_destination_goes_to_the_fallback_whatever_the_click(settings: Any) -> None:
    settings.CLICK_FALLBACK_URL = FALLBACK
    for destination in (
        "",
        "javascript:alert(1)",
        "https://{{name}}.example.com/",
        "https://x/{{a",
    ):
        target = Target(destination, True, "Sale", 0, {"name": "evil.example"})
        assert location_of(target) == FALLBACK
    assert location_of(None) == FALLBACK


# --- the event loop's clicks, handed over a turn at a time -----------------------------------


@pytest.mark.django_db(transaction=True)
def test_clicks_of_one_turn_of_the_loop_past_the_admission_limit_are_answered_503(
    redis_conn: redis.Redis, settings: Any
) -> None:
    settings.CLICK_MAX_PENDING = 5
    campaign, _ = campaign_with_message()
    messages = [make_message(campaign=campaign, contact=make_contact()) for _ in range(12)]

    async def flood() -> list[Any]:  # one turn of the loop: all twelve wait at once
        return await asyncio.gather(
            *[
                request("GET", f"/c/{click_token(m.id)}", headers={"user-agent": BROWSER})
                for m in messages
            ]
        )

    answers = asyncio.run(flood())
    assert sorted(a.status for a in answers) == [302] * 5 + [503] * 7
    assert all(a.headers["retry-after"] == "2" for a in answers if a.status == 503)
    assert Click.objects.count() == 5  # the five admitted, stored before their answers
    assert committer().batches_committed == 1  # handed over together: one statement
    committer_stop()
    assert counted(redis_conn) == {"stored": 5, "unavailable": 7}


@pytest.mark.django_db(transaction=True)
def test_a_click_not_committed_in_time_on_the_loop_gets_503_and_the_loop_goes_on(
    redis_conn: redis.Redis, settings: Any
) -> None:
    settings.CLICK_STORE_TIMEOUT_S = 0.6
    campaign, message = campaign_with_message()
    token = click_token(message.id)
    first = asyncio.run(request("GET", f"/c/{token}", headers={"user-agent": BROWSER}))
    assert first.status == 302  # the committers are up
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_clicks_table, args=(locked, release))
    holder.start()
    try:
        assert locked.wait(10)

        async def both() -> list[tuple[Any, float]]:
            started = time.monotonic()

            async def timed(path: str) -> tuple[Any, float]:
                answer = await request("GET", path, headers={"user-agent": BROWSER})
                return answer, time.monotonic() - started

            return await asyncio.gather(timed(f"/c/{token}"), timed("/c/not-a-token"))

        (late, late_s), (forged, forged_s) = asyncio.run(both())
    finally:
        release.set()
        holder.join(10)
    assert late.status == 503 and late.headers["retry-after"] == "2"
    assert 0.55 <= late_s < 3
    # The loop served others meanwhile: the forged token was answered at once.
    assert (forged.status, forged.headers["location"]) == (302, FALLBACK)
    assert forged_s < 0.4
    # Once the lock is gone the late click is stored after all (its 503 said "try again").
    deadline = time.monotonic() + 5
    while Click.objects.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert campaign_clicks(campaign.id).total == 2
    committer_stop()
    assert counted(redis_conn) == {"stored": 2, "unavailable": 1, "forged": 1}


def hold_clicks_table(locked: threading.Event, release: threading.Event) -> None:
    """From a session of its own: hold a lock that stops every INSERT into the clicks table."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("LOCK TABLE delivery_click IN EXCLUSIVE MODE")
            locked.set()
            release.wait(10)
    finally:
        connection.close()


# --- what the committers do to PostgreSQL ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_batch_runs_prepared_alone_in_autocommit_and_is_committed_when_it_returns() -> None:
    _, message = campaign_with_message()
    item = clicks_module._item_for(click_token(message.id), user_agent=BROWSER, method="GET")
    assert item is not None
    try:
        clicks_module._prepared_here()  # as a committer thread does, on its own connection
        clicks_module.batch_store([item])
        assert item.outcome == "stored"
        with connection.cursor() as cursor:
            # Committed already, without a COMMIT: another session sees the row.
            assert committed_clicks_elsewhere() == 1
            cursor.execute(
                "SELECT count(*) FROM pg_prepared_statements"
                " WHERE statement LIKE '%INSERT INTO delivery_click%'"
            )
            assert cursor.fetchone()[0] == 1
        clicks_module.batch_store([item])  # the same prepared statement again
        assert committed_clicks_elsewhere() == 2
    finally:
        if connection.connection is not None:
            connection.connection.prepare_threshold = None  # as Django leaves it


def committed_clicks_elsewhere() -> int:
    counted_rows: list[int] = []

    def count() -> None:
        try:
            counted_rows.append(Click.objects.count())
        finally:
            connection.close()

    reader = threading.Thread(target=count)
    reader.start()
    reader.join(10)
    return counted_rows[0]


@pytest.mark.django_db(transaction=True)
def test_without_prepared_statements_the_committers_still_store(settings: Any) -> None:
    settings.CLICK_PREPARED_STATEMENTS = False
    campaign, message = campaign_with_message()
    answer = asyncio.run(request("GET", f"/c/{click_token(message.id)}"))
    assert answer.status == 302
    assert committer().prepared is False
    assert campaign_clicks(campaign.id).previews == 1  # no User-Agent: a machine


@pytest.mark.django_db
def test_clicks_keep_their_relations_without_database_constraints() -> None:
    campaign, message = campaign_with_message()
    other = make_message(campaign=campaign, contact=make_contact())
    client = Client()
    for m in (message, message, other):
        assert click(client, click_token(m.id)).status_code == 302
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_constraint"
            " WHERE conrelid = 'delivery_click'::regclass AND contype = 'f'"
        )
        assert cursor.fetchone()[0] == 0
    # Django's on_delete does what the constraints did.
    contact_id = message.contact_id
    Message.objects.filter(id=message.id).delete()
    assert list(Click.objects.filter(message=None).values_list("contact_id", flat=True)) == [
        contact_id,
        contact_id,
    ]
    other.contact.delete()
    assert Click.objects.filter(message=other).get().contact_id is None
    campaign.delete()
    assert not Click.objects.exists()


# --- settings and metrics ----------------------------------------------------------------------


def test_the_click_settings_come_from_the_environment() -> None:
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "whatsblast.settings",
        "CLICK_MAX_PENDING": "7",
        "CLICK_STORE_TIMEOUT_S": "1.5",
        "CLICK_RETRY_AFTER_S": "9",
        "CLICK_COMMITTERS": "3",
        "CLICK_PREPARED_STATEMENTS": "0",
    }
    script = (
        "from django.conf import settings as s; print(s.CLICK_MAX_PENDING,"
        " s.CLICK_STORE_TIMEOUT_S, s.CLICK_RETRY_AFTER_S, s.CLICK_COMMITTERS,"
        " s.CLICK_PREPARED_STATEMENTS)"
    )
    read = subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60
    )
    assert read.stdout.split() == ["7", "1.5", "9", "3", "False"], read.stderr


@pytest.mark.django_db
def test_click_outcomes_are_exported_as_a_counter_from_zero(redis_conn: redis.Redis) -> None:
    first = scrape()
    for outcome in ("stored", "preview", "expired", "unknown", "forged", "unavailable"):
        assert first.value("whatsblast_clicks_total", outcome=outcome) == 0
    _, message = campaign_with_message()
    client = Client()
    click(client, click_token(message.id))
    click(client, click_token(message.id), agent=WHATSAPP_PREVIEW)
    click(client, "forged-token")
    after = scrape()
    assert after.value("whatsblast_clicks_total", outcome="stored") == 1
    assert after.value("whatsblast_clicks_total", outcome="preview") == 1
    assert after.value("whatsblast_clicks_total", outcome="forged") == 1
    assert after.value("whatsblast_clicks_total", outcome="unavailable") == 0
