"""schemathesis hooks for tests/api/test_schemathesis.py (loaded by ``st run`` through
SCHEMATHESIS_HOOKS).

Left alone, every generated send names a random phone number and template and ends in 400,
403 or 422, so the fuzzer would never see an accepted message. Half of the *positive*
(schema-valid) sends, chosen by a hash of the body so a seed replays the same run, are
pointed at the live number, a valid recipient and the approved one-parameter template,
keeping the generated parameter value. Negative cases are left alone: they must be refused.
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

import schemathesis
from schemathesis.generation.modes import GenerationMode

TO = "+5511987650001"
TEMPLATE = {"name": "otp", "language": "en_US"}


def _first_body_param(body: dict[str, Any]) -> str:
    template = body.get("template")
    params = template.get("params") if isinstance(template, dict) else None
    values = params.get("body") if isinstance(params, dict) else None
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, list) and values and isinstance(values[0], str):
        return values[0]
    return "123456"


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    number = os.environ.get("WB_FUZZ_PHONE_NUMBER_ID")
    body = case.body
    meta = case.meta
    if not number or not isinstance(body, dict) or "phone_number_id" not in body:
        return case
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    if zlib.crc32(json.dumps(body, sort_keys=True, default=str).encode()) % 2:
        return case
    case.body = {
        "phone_number_id": number,
        "to": TO,
        "template": {**TEMPLATE, "params": {"body": [_first_body_param(body)]}},
    }
    return case


# --- campaigns --------------------------------------------------------------------------------

# The contact list a positive POST /campaigns is pointed at: the live server's fixture makes
# it (a campaign's audience must exist; without the list these creates are answered 422).
FUZZ_LIST = "fuzz"


@schemathesis.hook("map_case")
def campaigns_map_case(context: Any, case: Any) -> Any:
    """/campaigns cases the API could never accept, made ones it can.

    - ``POST /campaigns``: the send hook above turns half of the positive bodies (every
      campaign body has a ``phone_number_id``) into a message's, which schemathesis then
      counts as negative; those are made a campaign's on the live number: the approved
      ``otp`` template, its one parameter mapped, the fuzz list (positive again). The
      other half keep their generated settings on that template and list.
    - a positive ``GET /campaigns``: a cursor is opaque (only one the API gave out is
      valid), so a generated one is dropped.
    - half of the positive cases on one campaign (``/campaigns/{id}...``), chosen by a hash
      of the operation and the generated id, are pointed at a campaign the operation
      applies to (read from ``GET /campaigns`` with the run's key, or made through the API
      when there is none), so they get past 404 to the operation itself.
    """
    operation = case.operation
    method = operation.method.upper()
    number = os.environ.get("WB_FUZZ_PHONE_NUMBER_ID")
    body = case.body
    if method == "POST" and operation.path == "/campaigns" and number and _a_send(body):
        case.body = {
            "name": "fuzz",
            "phone_number_id": number,
            "template": TEMPLATE,
            "mapping": {"body": {"1": {"value": _first_body_param(body)}}},
            "audience": {"lists": [FUZZ_LIST]},
        }
        return case
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    if method == "POST" and operation.path == "/campaigns" and number and isinstance(body, dict):
        # The other positive bodies keep their generated settings (cap, link, holdout, ...)
        # on the live number's template and the fuzz list, so those settings are what the
        # API answers about, not a list that cannot exist. A generated send window is all
        # but never a real one (its zone an IANA name, its start and end apart), so half of
        # them, by a hash of the body, become one: the other half stay to be refused.
        fixed = {
            **body,
            "phone_number_id": number,
            "template": TEMPLATE,
            "mapping": {"body": {"1": {"value": "123456"}}},
            "audience": {"lists": [FUZZ_LIST]},
        }
        if "send_window" in body and zlib.crc32(json.dumps(body, default=str).encode()) % 2:
            fixed["send_window"] = {"start": "09:00", "end": "20:00", "time_zone": "UTC"}
        case.body = fixed
        return case
    if method == "GET" and operation.path == "/campaigns" and isinstance(case.query, dict):
        case.query = {k: v for k, v in case.query.items() if k != "cursor"}
    generated = (case.path_parameters or {}).get("id")
    if operation.path == "/messages/{id}" and isinstance(generated, int):
        # Half of the status reads on a message the run's key sent, so one is read whole
        # even when the stateful phase's links happen to reach none.
        if zlib.crc32(f"{method} {operation.path} {generated}".encode()) % 2 == 0:
            found = _message_for(operation.base_url, case.headers or {})
            if found is not None:
                case.path_parameters = {**case.path_parameters, "id": found}
        return case
    if operation.path.startswith("/campaigns/{id}") and isinstance(generated, int):
        pick = zlib.crc32(f"{method} {operation.path} {generated}".encode())
        if pick % 2 == 0:
            action = operation.path.rsplit("/", 1)[-1]
            found = _campaign_for(operation.base_url, case.headers or {}, action, pick // 2)
            if found is not None:
                case.path_parameters = {**case.path_parameters, "id": found}
    return case


# The statuses each transition applies to, and the transitions that bring a new draft
# there: a case is pointed at such a campaign (made when there is none), so it reaches the
# transition, not only its 404 or 409.
_APPLIES = {
    "launch": ("draft", "scheduled", "running"),
    "pause": ("scheduled", "running", "paused"),
    "resume": ("paused", "running"),
    "cancel": ("draft", "scheduled", "running", "paused"),
}
_STEPS = {"pause": ("launch",), "resume": ("launch", "pause")}


def _campaign_for(base_url: str, headers: dict[str, Any], action: str, pick: int) -> int | None:
    """A campaign ``action`` applies to (any, for a read): one of the run's key's, or a new
    one on the live number (the fuzz list, the ``otp`` template); None when neither can be."""
    import requests  # here, so this part only appends to the module

    auth = headers.get("Authorization")
    number = os.environ.get("WB_FUZZ_PHONE_NUMBER_ID")
    if not base_url or not auth:
        return None
    url = base_url.rstrip("/") + "/campaigns"
    auth_only = {"Authorization": auth}
    applies = _APPLIES.get(action)
    try:
        answer = requests.get(url, params={"limit": 1000}, headers=auth_only, timeout=10)
        rows = answer.json()["data"] if answer.ok else []
        ids = [int(r["id"]) for r in rows if applies is None or r["status"] in applies]
        if ids:
            return ids[pick % len(ids)]
        if not number:
            return None
        body = {
            "name": "fuzz",
            "phone_number_id": number,
            "template": TEMPLATE,
            "mapping": {"body": {"1": {"value": "123456"}}},
            "audience": {"lists": [FUZZ_LIST]},
        }
        created = requests.post(url, json=body, headers=auth_only, timeout=10)
        if created.status_code != 201:
            return None
        campaign_id = int(created.json()["id"])
        for step in _STEPS.get(action, ()):
            requests.post(f"{url}/{campaign_id}/{step}", headers=auth_only, timeout=10)
        return campaign_id
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None


_sent: list[int] = []


def _message_for(base_url: str, headers: dict[str, Any]) -> int | None:
    """A transactional message on the live number, sent once through the API."""
    import requests

    auth = headers.get("Authorization")
    number = os.environ.get("WB_FUZZ_PHONE_NUMBER_ID")
    if _sent or not base_url or not auth or not number:
        return _sent[0] if _sent else None
    body = {
        "phone_number_id": number,
        "to": TO,
        "template": {**TEMPLATE, "params": {"body": ["123456"]}},
    }
    try:
        answer = requests.post(
            base_url.rstrip("/") + "/messages",
            json=body,
            headers={"Authorization": auth, "Idempotency-Key": "fuzz-status-read"},
            timeout=10,
        )
        _sent.append(int(answer.json()["id"]))
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
    return _sent[0]


def _a_send(body: Any) -> bool:
    """Whether ``body`` is the send the hook above made of a generated body."""
    return (
        isinstance(body, dict)
        and set(body) == {"phone_number_id", "to", "template"}
        and body["to"] == TO
        and isinstance(body["template"], dict)
        and "params" in body["template"]
    )


# --- contacts, lists, segments, templates -----------------------------------------------------

# A rule any contacts table can run: it names no list or campaign that would have to exist.
SEGMENT_RULES = {"field": "name", "op": "exists", "value": True}
_LISTINGS = frozenset({"/contacts", "/lists", "/segments", "/templates"})


@schemathesis.hook("map_case")
def contacts_map_case(context: Any, case: Any) -> Any:
    """Positive cases of the contacts half that the API could never accept, made ones it can.

    - A listing's cursor is opaque (only one the API gave out is valid): a generated one is
      dropped.
    - ``POST /segments``: rules are checked against the rules contract and the lists and
      campaigns that exist (422 otherwise), which JSON Schema cannot say: the generated
      rules are replaced by a rule that holds, keeping the generated name and description.
    """
    operation = case.operation
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    method = operation.method.upper()
    if method == "GET" and operation.path in _LISTINGS and isinstance(case.query, dict):
        case.query = {k: v for k, v in case.query.items() if k != "cursor"}
    body = case.body
    if method == "POST" and operation.path == "/segments" and isinstance(body, dict):
        case.body = {**body, "rules": SEGMENT_RULES}
    return case


# --- journeys ---------------------------------------------------------------------------------


@schemathesis.hook("map_case")
def journeys_map_case(context: Any, case: Any) -> Any:
    """/journeys cases the API could never accept, made ones it can: a positive
    ``GET /journeys`` without the generated cursor (opaque: only one the API gave out is
    valid), and half of the positive cases on one journey pointed at the live server's
    journey (read from ``GET /journeys``), so they get past 404 to the operation itself."""
    operation = case.operation
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    if operation.path == "/journeys" and isinstance(case.query, dict):
        case.query = {k: v for k, v in case.query.items() if k != "cursor"}
    generated = (case.path_parameters or {}).get("id")
    if operation.path.startswith("/journeys/{id}") and isinstance(generated, int):
        if zlib.crc32(f"{operation.method} {operation.path} {generated}".encode()) % 2 == 0:
            found = _journey_for(operation.base_url, case.headers or {})
            if found is not None:
                case.path_parameters = {**case.path_parameters, "id": found}
    return case


def _journey_for(base_url: str, headers: dict[str, Any]) -> int | None:
    import requests

    auth = headers.get("Authorization")
    if not base_url or not auth:
        return None
    try:
        answer = requests.get(
            base_url.rstrip("/") + "/journeys", headers={"Authorization": auth}, timeout=10
        )
        rows = answer.json()["data"] if answer.ok else []
        return int(rows[0]["id"]) if rows else None
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
