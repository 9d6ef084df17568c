"""The transactional API fuzzed from its own OpenAPI document by schemathesis.

``st run`` (schemathesis's CLI, a separate process) reads /api/v1/openapi.json from a live
server and sends what it generates from it: the document's examples, its boundary values
(coverage), random positive and negative requests (fuzzing) and chains of operations
(stateful: a send, then its status URL). Every response must pass every check schemathesis
has: no 5xx, status code, content type, headers and body as documented, invalid requests
refused, authentication not ignored. The hooks in tests/api/schemathesis_hooks.py give
part of the generated sends the live number's id and template, so the fuzzer also gets
past 403/422 to real messages.

Auth and idempotency are asserted here too, over HTTP against the same server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import requests

from delivery.api.keys import api_key_create
from delivery.models import ApiScope, Message, MessageKind
from journeys.versions import journey_create, journey_go_live
from tests.api.support import DOCUMENT
from tests.factories import make_contact, make_contact_list, make_phone_number, make_template

pytestmark = pytest.mark.django_db(transaction=True)

HOOKS = "tests.api.schemathesis_hooks"
ROOT = Path(__file__).resolve().parents[2]
MAX_EXAMPLES = 30


@pytest.fixture
def live_api(live_server: Any, settings: Any) -> dict[str, str]:
    # Subscriptions' URLs as production checks them: internal addresses refused.
    settings.EVENTS_ALLOW_PRIVATE_URLS = False
    number = make_phone_number(phone_number_id="106540352242922", rate_per_second=80)
    make_template(
        account=number.account, name="otp", body_text="Your code is {{1}}", body_param_count=1
    )
    # The list generated campaigns are addressed to (tests/api/schemathesis_hooks.py).
    # A live journey on the number, which the fuzzer reads, pauses and resumes
    # (tests/api/schemathesis_hooks.py points journey cases at it), and feeds events.
    journey_go_live(
        journey=journey_create(
            name="fuzz",
            phone_number=number,
            definition={
                "entry": {"type": "event", "event": "cart_updated"},
                "steps": [
                    {"id": "wait", "type": "wait", "delay": {"hours": 1}},
                    {
                        "id": "send",
                        "type": "send",
                        "template": "otp",
                        "mapping": {"body": {"1": {"value": "123456"}}},
                    },
                ],
            },  # fmt: skip
        )
    )
    fuzz_list = make_contact_list(name="fuzz")
    for index in range(3):
        make_contact(phone=f"+551198765{index:04d}", contact_list=fuzz_list, name=f"C{index}")
    _, raw = api_key_create(
        name="fuzz",
        phone_number_ids=[number.phone_number_id],
        requests_per_second=100_000,
        scopes=list(ApiScope.values),
    )
    return {"url": f"{live_server.url}/api/v1", "key": raw, "number": number.phone_number_id}


def st_run(live_api: dict[str, str], report: Path, *args: str) -> subprocess.CompletedProcess[str]:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st, "schemathesis is missing: pip install -e '.[dev]'"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": HOOKS,
        "WB_FUZZ_PHONE_NUMBER_ID": live_api["number"],
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }
    return subprocess.run(  # noqa: S603
        [
            st,
            "--config-file",
            str(Path(__file__).with_name("schemathesis.toml")),
            "run",
            f"{live_api['url']}/openapi.json",
            "--header",
            f"Authorization: Bearer {live_api['key']}",
            "--checks",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            # Fixed, so a finding can be replayed; another (WB_FUZZ_SEED) looks elsewhere.
            os.environ.get("WB_FUZZ_SEED", "19"),
            "--workers",
            "1",
            "--request-timeout",
            "10",
            "--report",
            "junit",
            "--report-junit-path",
            str(report),
            *args,
        ],
        capture_output=True,
        text=True,
        # 34 operations: 230-320 s on the 2-core machine.
        timeout=660,
        cwd=report.parent,  # its cache (.schemathesis/) goes there, not into the tree
        env=env,
        check=False,
    )


@pytest.mark.timeout(720)
def test_schemathesis_finds_nothing(live_api: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    result = st_run(live_api, report)
    output = result.stdout + result.stderr
    print(output)  # the run summary, shown with -s or on failure
    assert result.returncode == 0, output
    assert "No issues found" in output, output
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in output, output
    suites = ElementTree.parse(report).getroot()  # noqa: S314 (schemathesis's own report)
    tested = {case.get("name") for case in suites.iter("testcase")}
    assert {
        "POST /messages",
        "GET /messages/{id}",
        "POST /contacts",
        "POST /segments",
        "POST /campaigns",
        "POST /campaigns/{id}/launch",
        "GET /campaigns/{id}/report",
        "POST /subscriptions",
    } <= tested, tested
    assert not [*suites.iter("failure"), *suites.iter("error")]
    # It reached accepted messages (the stateful phase then follows their status links),
    # not only refusals.
    assert Message.objects.filter(kind=MessageKind.TRANSACTIONAL).count() >= 5


def send(live_api: dict[str, str], body: Any, **headers: str) -> requests.Response:
    return requests.post(
        f"{live_api['url']}/messages",
        data=json.dumps(body),
        headers={"Content-Type": "application/json", **headers},
        timeout=10,
    )


def otp(live_api: dict[str, str]) -> dict[str, Any]:
    return {
        "phone_number_id": live_api["number"],
        "to": "+5511987650001",
        "template": {"name": "otp", "language": "en_US", "params": {"body": ["123456"]}},
    }


def test_without_a_valid_key_the_live_api_answers_401(live_api: dict[str, str]) -> None:
    documented = DOCUMENT["paths"]["/messages"]["post"]["responses"]
    assert "401" in documented and DOCUMENT["security"] == [{"bearer": []}]
    for headers, code in (
        ({}, "unauthenticated"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "unauthenticated"),
        ({"Authorization": "Bearer wb_0000000000_not-a-key"}, "invalid_api_key"),
        ({"Authorization": f"Bearer {live_api['key']}x"}, "invalid_api_key"),
    ):
        response = send(live_api, otp(live_api), **headers)
        assert response.status_code == 401, headers
        assert response.json()["error"]["code"] == code
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        status = requests.get(f"{live_api['url']}/messages/1", headers=headers, timeout=10)
        assert status.status_code == 401
    assert not Message.objects.exists()


def test_a_key_for_another_number_is_403_on_the_live_api(live_api: dict[str, str]) -> None:
    other = make_phone_number(rate_per_second=80)
    _, stranger = api_key_create(name="other", phone_number_ids=[other.phone_number_id])
    response = send(live_api, otp(live_api), Authorization=f"Bearer {stranger}")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "phone_number_not_allowed"
    assert not Message.objects.exists()


def test_the_same_idempotency_key_twice_is_one_message_on_the_live_api(
    live_api: dict[str, str],
) -> None:
    auth = {"Authorization": f"Bearer {live_api['key']}", "Idempotency-Key": "order-19"}
    first = send(live_api, otp(live_api), **auth)
    second = send(live_api, otp(live_api), **auth)
    assert (first.status_code, second.status_code) == (202, 200)
    assert second.headers["Idempotent-Replayed"] == "true"
    assert first.json()["id"] == second.json()["id"]
    assert first.headers["Location"] == second.headers["Location"]
    changed = send(live_api, {**otp(live_api), "to": "+5511987650002"}, **auth)
    assert changed.status_code == 409
    assert changed.json()["error"]["code"] == "idempotency_key_reused"
    assert Message.objects.count() == 1
