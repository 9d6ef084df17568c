"""Fixtures around the Cloud API simulator: a running simulator and a webhook receiver.

``simulator`` is a fresh in-process simulator on a free port, with one number
(``SIM_PHONE_NUMBER_ID`` / ``SIM_TOKEN``, 1,000 msg/s) and the templates below registered.
Point a PhoneNumber's ``api_base_url`` (or a SendRequest's ``base_url``) at ``simulator.url``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from delivery.simulator import SimConfig, SimulatorServer

SIM_PHONE_NUMBER_ID = "106540352242922"
SIM_DISPLAY_NUMBER = "15550783881"
SIM_TOKEN = "sim-token"
SIM_APP_SECRET = "sim-app-secret"
SIM_TEMPLATES = [
    # "Hi {{1}}": the default template of tests/factories.py
    {"name": "promo", "language": "en_US", "body_params": 1},
    {
        "name": "order_update",
        "language": "en_US",
        "body_params": 2,
        "header": "image",
        "buttons": ["quick_reply", "url"],
    },
    {
        "name": "welcome_named",
        "language": "en_US",
        "body_params": ["first_name"],
        "header": "text",
        "category": "UTILITY",
    },
]


@pytest.fixture
def simulator() -> Iterator[SimulatorServer]:
    server = SimulatorServer(
        SimConfig(seed=1234, app_secret=SIM_APP_SECRET),
        numbers=[
            {
                "phone_number_id": SIM_PHONE_NUMBER_ID,
                "access_token": SIM_TOKEN,
                "rate": 1000,
                "display_phone_number": SIM_DISPLAY_NUMBER,
            }
        ],
        templates=SIM_TEMPLATES,
    ).start()
    yield server
    server.stop()


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]


@dataclass
class WebhookReceiver:
    """A tiny HTTP server that keeps every POST's exact bytes; answers ``statuses`` in turn."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answers to give first, then 200
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else 200


@pytest.fixture
def webhook_receiver() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            status = receiver.next_status()
            with receiver.lock:
                receiver.received.append(Received(raw, dict(self.headers.items())))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/webhooks/whatsapp"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()
