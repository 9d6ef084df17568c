"""RQ jobs of the webhooks app: thin wrappers around the applier service."""

from __future__ import annotations

from webhooks.applier import events_drain


def webhook_apply_job() -> dict[str, int]:
    """Apply stored callback events until none is pending (or the time budget is spent).

    Enqueued (debounced) after each stored POST, and run periodically as the sweep that
    also retries unmatched statuses. Returns the run's counts.
    """
    return events_drain().as_dict()
