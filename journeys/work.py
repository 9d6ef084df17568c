"""One transaction's changes to journeys: instances loaded and changed in Python, then
written back in a few set-based statements, whatever their number.

The router (events), the sweep (due steps) and the entry checks each load the instances
they act on (locked), change them here, and ``Work.flush`` writes, in this order: new
instances (their ids are needed by what follows), the sends (their message ids go into
the instances and the history), the changed instances, the history, and the skipping of
unsent messages of instances that left for good. Each is one statement a batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import connection

from delivery.messages import JourneyMessage, journey_messages_insert, journey_pending_skip
from journeys.models import HistoryKind, InstanceState
from whatsblast.core.db import jsonb_value


@dataclass(slots=True)
class Instance:
    """An instance as loaded (or about to be created), changed in place."""

    id: int | None
    journey_id: int
    contact_id: int
    version: int
    key: str
    step: str
    entered_at: datetime
    due_at: datetime | None
    step_due_at: datetime | None = None
    waiting_since: datetime | None = None
    state: str = InstanceState.ACTIVE
    exited_at: datetime | None = None
    exit_kind: str = ""
    exit_reason: str = ""
    properties: dict[str, Any] = field(default_factory=dict)
    resumed: dict[str, Any] = field(default_factory=dict)
    last_message_id: int | None = None
    holdout: bool = False
    test: bool = False
    changed: bool = False

    @property
    def active(self) -> bool:
        return self.state == InstanceState.ACTIVE


# The columns every loader reads, in ``Instance``'s order up to ``test``.
INSTANCE_COLUMNS = (
    "id, journey_id, contact_id, version, key, step, entered_at, due_at, step_due_at, "
    "waiting_since, state, exited_at, exit_kind, exit_reason, properties, resumed, "
    "last_message_id, holdout, test"
)


def instances_from(rows: Sequence[Sequence[Any]]) -> list[Instance]:
    out = []
    for row in rows:
        values = list(row)
        values[14] = jsonb_value(values[14]) or {}
        values[15] = jsonb_value(values[15]) or {}
        out.append(Instance(*values))
    return out


@dataclass(frozen=True)
class HistoryEntry:
    instance: Instance
    version: int
    step: str
    kind: str
    detail: str
    at: datetime
    event_type: str = ""
    # The send this entry is about: a message id, or the (instance, step) of a send this
    # same flush inserts.
    message_id: int | None = None
    send_step: str = ""


@dataclass
class Work:
    """Changes gathered over a batch; ``flush`` writes them."""

    now: datetime
    new: list[Instance] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    sends: list[tuple[Instance, JourneyMessage]] = field(default_factory=list)
    # Instances that left and whose unsent messages go with them, with the reason.
    leaving: list[tuple[Instance, str]] = field(default_factory=list)
    # Filled by flush: the step campaigns and free-form messages written (for the kicks).
    campaigns_sent: set[int] = field(default_factory=set)
    freeform_ids: list[int] = field(default_factory=list)
    inserted: int = 0  # messages the sends became
    refused: int = 0  # new instances a concurrent one of the same key made redundant
    # Every instance this batch changed (by object), written by one UPDATE.
    touched: dict[int, Instance] = field(default_factory=dict)

    def touch(self, instance: Instance) -> None:
        instance.changed = True
        self.touched[id(instance)] = instance

    def log(
        self,
        instance: Instance,
        kind: str,
        detail: str = "",
        *,
        step: str | None = None,
        event_type: str = "",
        message_id: int | None = None,
        send_step: str = "",
    ) -> None:
        self.touch(instance)
        self.history.append(
            HistoryEntry(
                instance,
                instance.version,
                instance.step if step is None else step,
                kind,
                detail[:500],
                self.now,
                event_type,
                message_id,
                send_step,
            )
        )

    def exit(
        self, instance: Instance, kind: str, reason: str, *, skip_unsent: bool = False
    ) -> None:
        """The instance leaves: state, time and why; its unsent messages are skipped when
        it left for a reason that makes them wrong (an exit event, an opt-out)."""
        instance.state = InstanceState.EXITED
        instance.exited_at = self.now
        instance.exit_kind = kind
        instance.exit_reason = reason[:300]
        instance.due_at = None
        instance.waiting_since = None
        self.log(instance, HistoryKind.EXITED, reason, event_type=kind)
        if skip_unsent and instance.id is not None:
            self.leaving.append((instance, f"left the journey: {reason}"))

    def send(self, instance: Instance, message: JourneyMessage) -> None:
        self.sends.append((instance, message))

    # --- writing ---------------------------------------------------------------------------

    def flush(self) -> None:
        with connection.cursor() as cursor:
            self._insert_new(cursor)
            message_ids = self._insert_sends()
            self._update(cursor)
            self._insert_history(cursor, message_ids)
        by_reason: dict[str, list[int]] = {}
        for instance, reason in self.leaving:
            assert instance.id is not None
            by_reason.setdefault(reason, []).append(instance.id)
        for reason, ids in by_reason.items():
            journey_pending_skip(instance_ids=ids, reason=reason)

    def _insert_new(self, cursor: Any) -> None:
        if not self.new:
            return
        rows = [_instance_row(i) for i in self.new]
        cursor.execute(_INSERT_SQL, [json.dumps(rows, default=_json_default)])
        made = {(j, c, k): int(i) for i, j, c, k in cursor.fetchall()}
        for instance in self.new:
            instance.id = made.get((instance.journey_id, instance.contact_id, instance.key))
        self.refused += sum(1 for i in self.new if i.id is None)
        # The ones refused (an active instance of the key already there) write nothing.
        self.history = [h for h in self.history if h.instance.id is not None]
        self.sends = [(i, m) for i, m in self.sends if i.id is not None]
        for instance in self.new:
            instance.changed = False

    def _insert_sends(self) -> dict[tuple[int, str], int]:
        if not self.sends:
            return {}
        rows = []
        for instance, message in self.sends:
            assert instance.id is not None
            rows.append(_with_instance(message, instance.id))
        ids = journey_messages_insert(rows)
        self.inserted += len(ids)
        for instance, message in self.sends:
            assert instance.id is not None
            message_id = ids.get((instance.id, message.journey_step))
            if message_id is None:
                continue
            instance.last_message_id = message_id
            self.touch(instance)
            if message.campaign_id is not None:
                self.campaigns_sent.add(message.campaign_id)
            else:
                self.freeform_ids.append(message_id)
        return ids

    def _update(self, cursor: Any) -> None:
        changed = [i for i in self.touched.values() if i.changed and i.id]
        if not changed:
            return
        rows = [[i.id, *_instance_row(i)] for i in changed]
        cursor.execute(_UPDATE_SQL, [json.dumps(rows, default=_json_default)])

    def _insert_history(self, cursor: Any, message_ids: dict[tuple[int, str], int]) -> None:
        if not self.history:
            return
        rows = []
        for h in self.history:
            if h.instance.id is None:
                continue
            message_id = h.message_id
            if h.send_step:
                message_id = message_ids.get((h.instance.id, h.send_step))
            rows.append(
                [
                    h.instance.id, h.instance.journey_id, h.instance.contact_id, h.version,
                    h.step, h.kind, h.detail, message_id, h.event_type, h.at.isoformat(),
                ]
            )  # fmt: skip
        cursor.execute(_HISTORY_SQL, [json.dumps(rows)])


def _json_default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value)} is not JSON")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _instance_row(i: Instance) -> list[Any]:
    return [
        i.journey_id, i.contact_id, i.version, i.key, i.state, i.step, _iso(i.due_at),
        _iso(i.step_due_at), _iso(i.waiting_since), _iso(i.entered_at), _iso(i.exited_at),
        i.exit_kind, i.exit_reason, i.properties, i.resumed, i.last_message_id, i.holdout, i.test,
    ]  # fmt: skip


def _with_instance(message: JourneyMessage, instance_id: int) -> JourneyMessage:
    return replace(message, journey_instance_id=instance_id)


def _columns(first: int) -> str:
    """An ``_instance_row`` read from the jsonb array ``r``, its first value at ``first``."""
    names = (
        ("journey_id", "bigint"), ("contact_id", "bigint"), ("version", "int"), ("key", ""),
        ("state", ""), ("step", ""), ("due_at", "timestamptz"), ("step_due_at", "timestamptz"),
        ("waiting_since", "timestamptz"), ("entered_at", "timestamptz"),
        ("exited_at", "timestamptz"), ("exit_kind", ""), ("exit_reason", ""),
        ("properties", "jsonb"), ("resumed", "jsonb"), ("last_message_id", "bigint"),
        ("holdout", "boolean"), ("test", "boolean"),
    )  # fmt: skip
    parts = []
    for offset, (name, kind) in enumerate(names):
        at = first + offset
        if kind == "jsonb":
            parts.append(f"r->{at} AS {name}")
        elif kind:
            parts.append(f"(r->>{at})::{kind} AS {name}")
        else:
            parts.append(f"r->>{at} AS {name}")
    return ", ".join(parts)


# New instances; ON CONFLICT on the one-active-per-key index: a racing entry of the same
# key (none should exist, there is one router) is dropped rather than doubled.
_INSERT_SQL = f"""
INSERT INTO journeys_journeyinstance
       (journey_id, contact_id, version, key, state, step, due_at, step_due_at,
        waiting_since, entered_at, exited_at, exit_kind, exit_reason, properties, resumed,
        last_message_id, holdout, test, updated_at)
SELECT journey_id, contact_id, version, key, state, step, due_at, step_due_at,
       waiting_since, entered_at, exited_at, exit_kind, exit_reason, properties, resumed,
       last_message_id, holdout, test, now()
  FROM (SELECT {_columns(0)} FROM jsonb_array_elements(%s::jsonb) AS j(r)) AS n
ON CONFLICT DO NOTHING
RETURNING id, journey_id, contact_id, key
"""  # noqa: S608 - constants only

_UPDATE_SQL = f"""
UPDATE journeys_journeyinstance AS i
   SET version = u.version, key = u.key, state = u.state, step = u.step, due_at = u.due_at,
       step_due_at = u.step_due_at, waiting_since = u.waiting_since,
       exited_at = u.exited_at, exit_kind = u.exit_kind, exit_reason = u.exit_reason,
       properties = u.properties, resumed = u.resumed, last_message_id = u.last_message_id,
       updated_at = now()
  FROM (SELECT (r->>0)::bigint AS id, {_columns(1)}
          FROM jsonb_array_elements(%s::jsonb) AS j(r)) AS u
 WHERE i.id = u.id
"""  # noqa: S608 - constants only

_HISTORY_SQL = """
INSERT INTO journeys_journeyhistory
       (instance_id, journey_id, contact_id, version, step, kind, detail, message_id,
        event_type, at)
SELECT (r->>0)::bigint, (r->>1)::bigint, (r->>2)::bigint, (r->>3)::int, r->>4, r->>5,
       r->>6, (r->>7)::bigint, r->>8, (r->>9)::timestamptz
  FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(r, n)
 ORDER BY n
"""
