"""docs/api.md runs as written: every curl command on the page, in order, against the API,
each answer a 2xx that the OpenAPI document describes, and what they did is in the
database afterwards.

The commands are read with POSIX shell quoting (``shlex``), their ``$VARIABLES`` filled in
as a shell would: ``WB``, ``KEY`` and ``PNID`` from this test's set-up, and the ids the
page says to take from an answer (``$CONTACT``, ``$SEGMENT``, ``$CAMPAIGN``) from the
answers themselves.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client

from campaigns.models import Campaign, CampaignStatus, Contact
from delivery.api.keys import api_key_create
from delivery.models import EventSubscription, Message
from tests.api.support import DOCUMENT, response_check
from tests.factories import make_phone_number, make_template

pytestmark = pytest.mark.django_db

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
WB = "https://whatsblast.example.com"
PNID = "106540352242922"

# Which answer gives the id the page names next: (method, path) → (variable, how to read it).
TAKEN = {
    ("GET", "/api/v1/contacts"): ("CONTACT", lambda body: body["data"][0]["id"]),
    ("POST", "/api/v1/segments"): ("SEGMENT", lambda body: body["id"]),
    ("POST", "/api/v1/campaigns"): ("CAMPAIGN", lambda body: body["id"]),
}
_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def page_commands() -> list[str]:
    """The page's shell commands, continuation lines joined, in order."""
    blocks = re.findall(r"^```sh\n(.*?)^```", PAGE.read_text(), flags=re.M | re.S)
    assert blocks, "docs/api.md has no sh blocks"
    commands: list[str] = []
    for block in blocks:
        pending = ""
        for line in block.splitlines(keepends=True):
            pending += line
            if pending.endswith("\\\n"):
                pending = pending[:-2] + " "  # a continuation line
                continue
            try:
                shlex.split(pending, comments=True)
            except ValueError:
                continue  # inside quotes: the command goes on
            if pending.strip():
                commands.append(pending.strip())
            pending = ""
        assert not pending.strip(), f"unfinished command: {pending}"
    return commands


def curl_request(command: str, variables: dict[str, str]) -> dict[str, Any]:
    words = shlex.split(command, comments=True)
    assert words[0] == "curl", command
    words = [_VARIABLE.sub(lambda m: variables[m.group(1) or m.group(2)], w) for w in words]
    request: dict[str, Any] = {"method": "GET", "headers": {}, "data": None, "url": None}
    at = 1
    while at < len(words):
        word = words[at]
        if word in ("-X", "--request"):
            request["method"] = words[at + 1]
            at += 2
        elif word in ("-H", "--header"):
            name, _, value = words[at + 1].partition(":")
            request["headers"][name.strip()] = value.strip()
            at += 2
        elif word in ("-d", "--data"):
            request["data"] = words[at + 1]
            if request["method"] == "GET":
                request["method"] = "POST"  # as curl does
            at += 2
        elif word in ("-o", "--output"):
            at += 2
        elif word.startswith("-"):
            assert word in ("-sS", "-s", "-S"), f"an option this test does not read: {word}"
            at += 1
        else:
            assert request["url"] is None, command
            request["url"] = word
            at += 1
    return request


def documented_path(path: str) -> str:
    """The document's path template a request path answers to."""
    for template in DOCUMENT["paths"]:
        pattern = re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(template))
        if re.fullmatch(pattern, path.removeprefix("/api/v1")):
            return str(template)
    raise AssertionError(f"{path} is not in the document")


def test_every_command_on_the_api_page_works_as_written() -> None:
    number = make_phone_number(phone_number_id=PNID, rate_per_second=80)
    make_template(
        account=number.account,
        name="spring_sale",
        language="pt_BR",
        body_text="Oi {{1}}, a promoção de primavera começou!",
        body_param_count=1,
    )
    _, key = api_key_create(name="shop", phone_number_ids=[PNID], scopes=["contacts", "campaigns"])
    variables = {"WB": WB, "KEY": key, "PNID": PNID}
    client = Client()
    commands = page_commands()
    assert commands[:3] == [
        f"WB={WB}",
        "KEY=wb_...   # manage.py apikey create --name shop --number "
        f"{PNID} --scope contacts --scope campaigns",
        f"PNID={PNID}",
    ]
    ran = []
    for command in commands[3:]:
        request = curl_request(command, variables)
        url = urlsplit(request["url"])
        assert f"{url.scheme}://{url.netloc}" == WB, command
        if request["data"] is not None:
            json.loads(request["data"])  # the page's bodies are JSON as written
        response = client.generic(
            request["method"],
            f"{url.path}?{url.query}" if url.query else url.path,
            data=(request["data"] or "").encode(),
            content_type=request["headers"].pop("Content-Type", "application/json"),
            headers=request["headers"],
        )
        assert 200 <= response.status_code < 300, (command, response.content[:500])
        body = response_check(documented_path(url.path), request["method"].lower(), response)
        taken = TAKEN.get((request["method"], url.path))
        if taken is not None:
            name, read = taken
            variables[name] = str(read(body))
        ran.append((request["method"], documented_path(url.path)))

    assert ("GET", "/campaigns/{id}/results.csv") in ran and len(ran) == len(commands) - 3
    # What the page said it would do.
    ana, bruno = (Contact.objects.get(phone=p) for p in ("+5511987650001", "+5511987650002"))
    assert bruno.opted_out_at is not None and ana.opted_out_at is None
    campaign = Campaign.objects.get(pk=variables["CAMPAIGN"])
    assert campaign.status == CampaignStatus.RUNNING  # launched, paused, resumed
    messages = Message.objects.filter(campaign=campaign)
    outcome = {m.contact_id: (m.status, m.skip_reason) for m in messages}
    carla = Contact.objects.get(user_id="BR.1234567890123456")
    assert outcome == {
        ana.pk: ("skipped", "left out: segment Recife gold"),
        bruno.pk: ("skipped", "opted out"),
        carla.pk: ("pending", ""),
    }
    assert EventSubscription.objects.get().event_types == sorted(
        ["message.delivered", "message.failed", "reply.received", "contact.opted_out"]
    )
