"""Clicks on tracked links (delivery/engagement/clicks.py, whatsblast/views/clicks*.py).

Against the real PostgreSQL and Redis: a click through the Django view (inline inside the
test's transaction, and grouped by the real committer threads in autocommit), through the
ASGI application on a real event loop, and through gunicorn over real HTTP. The database
"going away" is real too: the committer's session is terminated by the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import redis
import requests
from django.db import connection
from django.test import Client
from django.utils import timezone

from campaigns.models import Campaign
from delivery.engagement.clicks import (
    CLICKS_KEY,
    ClickCounts,
    campaign_clicks,
    campaign_clicks_by_variant,
    committer,
    committer_stop,
    is_preview_fetch,
    message_click_counts,
)
from delivery.models import Click, Message
from tests.factories import make_campaign, make_contact, make_message
from tests.observability.test_deploy import production_env, web_process
from tests.webhooks.test_asgi import request
from whatsblast.core.click_tokens import click_token
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
