"""One kept-alive connection to the web process, as deploy/ starts it, carries every request.

The web process is started with the production command (``gunicorn -c
deploy/gunicorn.conf.py whatsblast.asgi``, two processes) and, in the second pair of tests,
reached through nginx with the web and webhook blocks of deploy/nginx/whatsblast.conf. One
client (httpx, then requests) sends over one connection, one request after another, bodies
from 1 KB to 1 MB (in steps of 100 bytes across 64 KiB) to four places: the contacts API
(a key with the contacts scope), a path that 404s without reading the body, the admin's
contact upload form (logged in, with its CSRF token) and Meta's webhook (signed), each
followed by a small GET. Every request must be answered as expected, and the client must
never have had to open a second connection: a server that closes a kept-alive connection
says ``Connection: close`` in the answer before, and none of these requests is a reason to.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import urllib3
from django.contrib.auth import get_user_model
from django.urls import reverse

from delivery.api.keys import api_key_create
from tests.factories import make_contact_list
from tests.observability.test_deploy import DEPLOY, production_env, web_process
from whatsblast.core.processes import ProcessGroup, free_port, service_environment, wait_for_http

pytestmark = pytest.mark.django_db(transaction=True)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PASSWORD = "keep-alive-password-1"  # noqa: S105 - a test user's
# 1 KB to 1 MB, and 64 KiB crossed in steps of 100 bytes: where the web process used to
# drop one request in three.
SIZES = (
    [1_000, 4_000, 16_000, 32_000, 48_000, 56_000]
    + list(range(60_000, 72_001, 100))
    + [80_000, 100_000, 131_072, 200_000, 262_144, 300_000, 524_288, 700_000, 1_000_000]
)


@dataclass(frozen=True)
class Call:
    """One request of the run and the status its answer must have."""

    method: str
    path: str
    expected: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    form: tuple[tuple[str, str], ...] = ()
    file: bytes | None = None


@dataclass(frozen=True)
class Site:
    """The running web process (or the proxy in front of it) and what the calls need."""

    url: str
    api_key: str
    app_secret: str
    upload_path: str
    username: str


def contacts_body(size: int, offset: int) -> bytes:
    """An upsert of about ``size`` bytes: contacts of twenty 1,000-character attributes,
    the last attribute cut to the size."""
    count = size // 1_010 + 1
    contacts = [
        {
            "phone": f"+55119{offset + start // 20:08d}",
            "attributes": {f"a{n:02d}": "x" * 1_000 for n in range(start, min(start + 20, count))},
        }
        for start in range(0, count, 20)
    ]
    body = json.dumps({"contacts": contacts}).encode()
    last = contacts[-1]["attributes"]
    name = max(last)
    last[name] = last[name][: max(1, 1_000 - (len(body) - size))]
    return json.dumps({"contacts": contacts}).encode()


def csv_body(size: int) -> bytes:
    """A contact file of about ``size`` bytes (rows of 19)."""
    rows = [b"phone,name"] + [b"+55119%08d,Ana" % n for n in range(size // 19)]
    return b"\n".join(rows) + b"\n"


def webhook_body(size: int, n: int) -> bytes:
    """Meta's callback with as many delivered statuses as make about ``size`` bytes."""
    status = {"status": "delivered", "timestamp": "1765000000", "recipient_id": "16505551234"}
    compact = (",", ":")
    each = len(json.dumps({**status, "id": f"wamid.keep-alive-{n}-000000"}, separators=compact)) + 1
    statuses = [
        {**status, "id": f"wamid.keep-alive-{n}-{i:06d}"} for i in range(max(1, size // each))
    ]
    value = {"messaging_product": "whatsapp", "statuses": statuses}
    change = {"field": "messages", "value": value}
    envelope = {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [change]}]}
    return json.dumps(envelope, separators=compact).encode()


def signed(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def calls(site: Site) -> Iterator[Call]:
    """The run: each size to each of the four places, a small GET after each."""
    healthz = Call("GET", "/healthz", 200)
    auth = ("Authorization", f"Bearer {site.api_key}")
    json_type = ("Content-Type", "application/json")
    for n, size in enumerate(SIZES):
        yield Call("POST", "/api/v1/contacts", 201, contacts_body(size, n * 100), (auth, json_type))
        yield healthz
        yield Call("POST", "/no/such/page/", 404, os.urandom(size), (json_type,))
        yield healthz
        yield Call("POST", site.upload_path, 302, file=csv_body(size))
        yield healthz
        body = webhook_body(size, n)
        signature = ("X-Hub-Signature-256", signed(body, site.app_secret))
        yield Call("POST", "/webhooks/whatsapp", 200, body, (signature, json_type))
        yield healthz


@dataclass(frozen=True)
class Answer:
    """A status, the connection that carried it (as the client tells them apart; ``None``
    once closed) and whether the answer said the connection ends with it."""

    status: int
    connection: int | None
    closes: bool


class HttpxClient:
    """httpx over one pooled connection, told apart by its local port."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30, follow_redirects=False)

    def send(self, call: Call, csrf: str) -> Answer:
        files = None if call.file is None else {"file": ("contacts.csv", call.file, "text/csv")}
        data = dict(call.form) | ({"csrfmiddlewaretoken": csrf} if call.file is not None else {})
        response = self.client.request(
            call.method,
            call.path,
            content=call.body or None,
            data=data or None,
            files=files,
            headers=dict(call.headers),
        )
        try:
            port = response.extensions["network_stream"].get_extra_info("client_addr")[1]
        except OSError:
            port = None  # closed once the answer was read
        closes = response.headers.get("connection", "").lower() == "close"
        return Answer(response.status_code, port, closes)

    def cookie(self, name: str) -> str:
        return str(self.client.cookies.get(name, ""))

    def close(self) -> None:
        self.client.close()


def counting_pool(opened: list[int]) -> type[urllib3.HTTPConnectionPool]:
    """urllib3's pool whose connections count each socket they open in ``opened[0]``."""

    class Counted(urllib3.connection.HTTPConnection):
        def connect(self) -> None:
            opened[0] += 1
            super().connect()

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Counted

    return Pool


class RequestsClient:
    """requests over one pooled connection, told apart by how many sockets it had opened."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened = [0]
        adapter = requests.adapters.HTTPAdapter(pool_maxsize=1)
        adapter.poolmanager.pool_classes_by_scheme = {"http": counting_pool(self.opened)}
        self.session = requests.Session()
        self.session.mount("http://", adapter)

    def send(self, call: Call, csrf: str) -> Answer:
        files = None if call.file is None else {"file": ("contacts.csv", call.file, "text/csv")}
        data = dict(call.form) | ({"csrfmiddlewaretoken": csrf} if call.file is not None else {})
        response = self.session.request(
            call.method,
            self.url + call.path,
            data=call.body or data or None,
            files=files,
            headers=dict(call.headers),
            timeout=30,
            allow_redirects=False,
        )
        closes = response.headers.get("connection", "").lower() == "close"
        return Answer(response.status_code, self.opened[0], closes)

    def cookie(self, name: str) -> str:
        return str(self.session.cookies.get(name, ""))

    def close(self) -> None:
        self.session.close()


Client = HttpxClient | RequestsClient


def log_in(client: Client, site: Site) -> None:
    """The admin's login form, on the same connection: its CSRF token, then the POST."""
    assert client.send(Call("GET", "/admin/login/", 200), "").status == 200
    form = (
        ("username", site.username),
        ("password", PASSWORD),
        ("next", "/admin/"),
        ("csrfmiddlewaretoken", client.cookie("csrftoken")),
    )
    answer = client.send(Call("POST", "/admin/login/", 302, form=form), "")
    assert answer.status == 302, "the admin login failed"


@dataclass
class Outcome:
    """What one client saw over the run: requests sent, what went wrong with any of them
    (no answer, the wrong status, a new connection though the last answer kept the old one
    open), and how many connections carried them."""

    sent: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    connections: set[int] = dataclasses.field(default_factory=set)


def run(client: Client, site: Site) -> Outcome:
    """Every call of the run, one after another."""
    log_in(client, site)
    outcome = Outcome()
    last: Answer | None = None
    for call in calls(site):
        outcome.sent += 1
        size = len(call.body or call.file or b"")
        label = f"#{outcome.sent} {call.method} {call.path} ({size} B)"
        try:
            answer = client.send(call, client.cookie("csrftoken"))
        except (httpx.HTTPError, requests.RequestException) as exc:
            outcome.failures.append(f"{label}: {type(exc).__name__}: {exc}")
            last = None
            continue
        if answer.status != call.expected:
            outcome.failures.append(f"{label}: {answer.status}, not {call.expected}")
        if answer.connection is not None:
            if last and last.connection not in (None, answer.connection) and not last.closes:
                outcome.failures.append(f"{label}: a new connection, the last answer kept it")
            outcome.connections.add(answer.connection)
        last = answer
    return outcome


def assert_every_request_answered(
    make: Callable[[str], Client], site: Site, *, one_connection: bool
) -> None:
    """The run through a new client: every request answered as expected, every connection
    ended only by an answer that said so, and with ``one_connection`` none ended at all."""
    client = make(site.url)
    started = time.monotonic()
    try:
        outcome = run(client, site)
    finally:
        client.close()
    print(f"{make.__name__}: {outcome.sent} requests in {time.monotonic() - started:.1f}s")
    assert outcome.sent >= 1000
    assert outcome.failures == [], f"{len(outcome.failures)} of {outcome.sent}: " + "\n".join(
        outcome.failures[:20]
    )
    if one_connection:
        assert len(outcome.connections) == 1, f"{len(outcome.connections)} connections"


def nginx_block(text: str, name: str) -> str:
    """The lines between ``# BEGIN name`` and ``# END name`` of the deployed config."""
    start = text.index(f"# BEGIN {name}")
    end = text.index(f"# END {name}")
    return text[text.index("\n", start) + 1 : end]


def nginx_conf(directory: Path, *, port: int, upstream_port: int) -> str:
    """deploy/nginx/whatsblast.conf's upstreams and locations, on plain HTTP and this run's
    ports (the TLS server block needs certificates the test does not have)."""
    deployed = (DEPLOY / "nginx" / "whatsblast.conf").read_text()
    upstreams = nginx_block(deployed, "web upstream") + nginx_block(deployed, "webhook upstream")
    locations = nginx_block(deployed, "webhook location") + nginx_block(deployed, "web location")
    temp = [
        f"{kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    ]
    return "\n".join(
        [
            "daemon off;",
            "worker_processes 1;",
            "user root;" if os.geteuid() == 0 else "",
            f"pid {directory / 'nginx.pid'};",
            f"error_log {directory / 'error.log'} warn;",
            "events { worker_connections 256; }",
            "http {",
            "access_log off;",
            *temp,
            upstreams.replace("127.0.0.1:8000", f"127.0.0.1:{upstream_port}"),
            "server {",
            f"listen 127.0.0.1:{port};",
            "client_max_body_size 5m;",
            locations,
            "}",
            "}",
        ]
    )


@contextmanager
def nginx_in_front(directory: Path, web_url: str) -> Iterator[str | None]:
    """nginx with the deployed blocks in front of ``web_url``: its URL, ``None`` where
    nginx is not installed."""
    if not Path(NGINX).exists():
        yield None
        return
    directory.mkdir()
    port = free_port()
    conf = directory / "nginx.conf"
    conf.write_text(nginx_conf(directory, port=port, upstream_port=int(web_url.rsplit(":")[-1])))
    group = ProcessGroup(directory / "logs", {})
    group.start("nginx", [NGINX, "-c", str(conf)], python=False)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz")
        yield f"http://127.0.0.1:{port}"
    finally:
        group.stop()


@dataclass(frozen=True)
class Servers:
    """The web process, nginx in front of it (if installed), and the app secret."""

    web: str
    proxy: str | None
    app_secret: str


@pytest.fixture(scope="module")
def servers(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Servers]:
    """Started once for the module: each test brings its own key, user and list."""
    directory = tmp_path_factory.mktemp("keep-alive")
    with django_db_blocker.unblock():
        database = service_environment()
    env = production_env(
        ALLOWED_HOSTS="127.0.0.1",
        **database,
        STATIC_ROOT=str(directory / "static"),
        CONTACT_UPLOAD_DIR=str(directory / "uploads"),
        GUNICORN_WORKERS="2",
        GUNICORN_THREADS="4",
        # Plain HTTP from the test: no redirect to HTTPS, cookies sent back over it.
        SECURE_SSL_REDIRECT="0",
        SESSION_COOKIE_SECURE="0",
        CSRF_COOKIE_SECURE="0",
        LOG_FORMAT="text",
    )
    with (
        web_process(directory, env) as (url, _log),
        nginx_in_front(directory / "nginx", url) as proxy,
    ):
        yield Servers(url, proxy, env["WHATSAPP_APP_SECRET"])


def site_at(url: str, servers: Servers) -> Site:
    """A key with the contacts scope, a superuser and a contact list, reached at ``url``."""
    _, api_key = api_key_create(
        name="keep-alive", scopes=["contacts"], requests_per_second=100_000, all_numbers=True
    )
    user = get_user_model().objects.create_superuser("keepalive", "k@example.com", PASSWORD)
    upload_path = reverse("admin:campaigns_contactlist_upload", args=[make_contact_list().pk])
    return Site(url, api_key, servers.app_secret, upload_path, user.get_username())


@pytest.fixture
def web(servers: Servers, transactional_db: None) -> Site:
    return site_at(servers.web, servers)


@pytest.fixture
def proxied(servers: Servers, transactional_db: None) -> Site:
    if servers.proxy is None:
        pytest.skip("nginx is not installed (Debian's nginx-light)")
    return site_at(servers.proxy, servers)


def test_httpx_sends_everything_over_one_kept_alive_connection(web: Site) -> None:
    assert_every_request_answered(HttpxClient, web, one_connection=True)


def test_requests_sends_everything_over_one_kept_alive_connection(web: Site) -> None:
    assert_every_request_answered(RequestsClient, web, one_connection=True)


# nginx ends a client's connection after its keepalive_requests (1,000) with
# "Connection: close": the client opens another, which the run allows for.
def test_httpx_through_the_proxy_has_every_request_answered(proxied: Site) -> None:
    assert_every_request_answered(HttpxClient, proxied, one_connection=False)


def test_requests_through_the_proxy_has_every_request_answered(proxied: Site) -> None:
    assert_every_request_answered(RequestsClient, proxied, one_connection=False)
