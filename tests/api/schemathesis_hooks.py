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
