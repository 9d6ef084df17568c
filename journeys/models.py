"""Journeys: sends that start themselves, kept in PostgreSQL.

A ``Journey`` holds its versions (``JourneyVersion``: the definition, journeys.definition);
each person in it is a ``JourneyInstance``, whose row is also its waiting step: the step
it is at, the version, and ``due_at``, when the sweep (journeys.sweep) acts on it next.
Everything that happens to an instance is a ``JourneyHistory`` row (entered, waited,
sent, skipped and why, branched, exited and why): what the customer page and the reports
read, and what the events out are written from. Events in from other systems are
``ContactEvent`` rows, routed to journeys in the order they were stored.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class JourneyStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    LIVE = "live", "Live"
    PAUSED = "paused", "Paused"
    ARCHIVED = "archived", "Archived"


class Journey(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    phone_number = models.ForeignKey(
        "campaigns.PhoneNumber", on_delete=models.PROTECT, related_name="journeys"
    )
    status = models.CharField(
        max_length=16, choices=JourneyStatus.choices, default=JourneyStatus.DRAFT
    )
    status_reason = models.CharField(max_length=500, blank=True)
    # The version new entrants and waiting instances follow (JourneyVersion.number).
    version = models.PositiveIntegerField(default=1)
    # When it last went live (a date entry counts occurrences from here) and was paused.
    live_since = models.DateTimeField(null=True, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    # Entries refused, by why (paused, once, after_days, no key): never silently.
    entries_refused = models.JSONField(default=dict, blank=True)
    # Bookkeeping of the entry checks (segment, date, schedule): when each last ran.
    entry_checked_at = models.DateTimeField(null=True, blank=True)
    entry_check_error = models.CharField(max_length=500, blank=True)
    # People whose waits may be skipped from the admin, and whom the admin may enter by
    # hand: for trying a journey without waiting days.
    test_contacts = models.ManyToManyField("campaigns.Contact", blank=True, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        permissions = [("run_journey", "Can put journeys live, pause, resume and archive them")]

    def __str__(self) -> str:
        return self.name


class JourneyVersion(models.Model):
    """One definition of a journey; editing a live journey adds a version."""

    journey = models.ForeignKey(Journey, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    definition = models.JSONField()
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("journey", "-number")
        constraints = [
            models.UniqueConstraint(fields=("journey", "number"), name="journey_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.journey_id} v{self.number}"


class JourneyStepCampaign(models.Model):
    """The campaign a journey's send step sends through: the engine sees a running campaign
    like any other (its rate share, reserve, cap, window, report), one per step id, kept
    across versions while the step exists."""

    journey = models.ForeignKey(Journey, on_delete=models.CASCADE, related_name="step_campaigns")
    step = models.CharField(max_length=40)
    campaign = models.OneToOneField(
        "campaigns.Campaign", on_delete=models.PROTECT, related_name="journey_step"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("journey", "step"), name="journey_step_campaign_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.journey_id}/{self.step}: campaign {self.campaign_id}"


class JourneyRun(models.Model):
    """One run of a recurring campaign: a campaign of its own, launched at its time. The
    unique time makes a run happen once, whatever number of ticks see it due."""

    journey = models.ForeignKey(Journey, on_delete=models.CASCADE, related_name="runs")
    scheduled_for = models.DateTimeField()
    campaign = models.OneToOneField(
        "campaigns.Campaign",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="journey_run",
    )
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("journey", "-scheduled_for")
        constraints = [
            models.UniqueConstraint(
                fields=("journey", "scheduled_for"), name="journey_run_once_per_time"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.journey_id} run {self.scheduled_for:%Y-%m-%d %H:%M}"


class InstanceState(models.TextChoices):
    ACTIVE = "active", "In the journey"
    EXITED = "exited", "Left"


class ExitKind(models.TextChoices):
    COMPLETED = "completed", "Completed"
    EXIT_STEP = "exit_step", "Reached an exit step"
    EXIT_EVENT = "exit_event", "Exit event"
    OPTED_OUT = "opted_out", "Opted out"
    STEP_REMOVED = "step_removed", "Its step was removed in a new version"
    ARCHIVED = "archived", "The journey was archived"
    ERASED = "erased", "Erased"
    ERROR = "error", "Could not go on"


class JourneyInstance(models.Model):
    """One person's way through a journey, and its waiting step.

    ``due_at`` is when the sweep acts on it next: the end of a delay, a wait's timeout, a
    send window's opening, or now. ``step_due_at`` is when its current step first became
    due, which the lateness limit is measured from. One active instance per (journey,
    contact, key) is a database constraint: a repeated event can reset an instance but
    never start a second one beside it.
    """

    # Neither key has an index of its own: the composite ones below lead with each. One on
    # the journey alone misled the planner (journeys.routing, _INSTANCES_SQL).
    journey = models.ForeignKey(
        Journey, on_delete=models.CASCADE, related_name="instances", db_index=False
    )
    contact = models.ForeignKey(
        "campaigns.Contact", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    version = models.PositiveIntegerField()
    # The instance key's value (cart_id, order_id, an occurrence's date); '' when unkeyed.
    key = models.CharField(max_length=200, blank=True, default="")
    state = models.CharField(
        max_length=8, choices=InstanceState.choices, default=InstanceState.ACTIVE
    )
    step = models.CharField(max_length=40)
    due_at = models.DateTimeField(null=True, blank=True)
    step_due_at = models.DateTimeField(null=True, blank=True)
    # When the current wait began (a reset moves it); a changed wait is measured from it.
    waiting_since = models.DateTimeField(null=True, blank=True)
    entered_at = models.DateTimeField()
    exited_at = models.DateTimeField(null=True, blank=True)
    exit_kind = models.CharField(max_length=16, choices=ExitKind.choices, blank=True)
    exit_reason = models.CharField(max_length=300, blank=True)
    # The latest entry event's properties (a cart's items, an order id), for mappings and
    # branches.
    properties = models.JSONField(default=dict, blank=True)
    # What ended the last wait: {"how": "event"|"reply"|"timeout", "event", "text",
    # "button", "at"}.
    resumed = models.JSONField(default=dict, blank=True)
    last_message_id = models.BigIntegerField(null=True, blank=True)
    # Held out: passes every step, sends nothing (the journey's lift).
    holdout = models.BooleanField(default=False)
    # A test contact's instance: its waits can be skipped from the admin.
    test = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("journey", "contact", "key"),
                condition=models.Q(state="active"),
                name="journey_instance_one_active_per_key",
            ),
        ]
        indexes = [
            # The sweep's: active instances of a live journey by when they are due.
            models.Index(
                fields=("journey", "due_at"),
                condition=models.Q(state="active"),
                name="journey_instance_due_idx",
            ),
            # Re-entry rules and the per-person view: a contact's instances of a journey.
            models.Index(
                fields=("contact", "journey", "entered_at"), name="journey_instance_contact_idx"
            ),
            # The counts by step now.
            models.Index(
                fields=("journey", "step"),
                condition=models.Q(state="active"),
                name="journey_instance_step_idx",
            ),
            # The list's and the report's counts by state (test contacts left out).
            models.Index(
                fields=("journey", "state"),
                condition=models.Q(test=False),
                name="journey_instance_state_idx",
            ),
        ]
        verbose_name = "person in a journey"
        verbose_name_plural = "people in journeys"

    def __str__(self) -> str:
        return f"instance {self.pk} of journey {self.journey_id} for {self.contact_id}"


class HistoryKind(models.TextChoices):
    ENTERED = "entered", "Entered"
    RESET = "reset", "Reset by a repeated event"
    WAITING = "waiting", "Waiting"
    RESUMED = "resumed", "Wait ended"
    SENT = "sent", "Sent"
    SKIPPED = "skipped", "Skipped"
    DEFERRED = "deferred", "Deferred"
    BRANCHED = "branched", "Branched"
    EMITTED = "emitted", "Event sent out"
    MIGRATED = "migrated", "Moved to a new version"
    EXITED = "exited", "Left"


class JourneyHistory(models.Model):
    """What happened to an instance, and why, in order. Events out are written from these
    rows by a trigger (migration 0002) in the transaction that writes them."""

    instance = models.ForeignKey(JourneyInstance, on_delete=models.CASCADE, related_name="history")
    journey_id = models.BigIntegerField()
    contact_id = models.BigIntegerField()
    version = models.PositiveIntegerField()
    step = models.CharField(max_length=40, blank=True)
    kind = models.CharField(max_length=16, choices=HistoryKind.choices)
    detail = models.CharField(max_length=500, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    # An emitted event's type (order.cancel_requested), or the exit kind.
    event_type = models.CharField(max_length=100, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ("instance", "id")
        indexes = [
            models.Index(fields=("instance", "id"), name="journey_history_instance_idx"),
            models.Index(fields=("journey_id", "kind"), name="journey_history_kind_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id} {self.kind} {self.step}"


class ContactEvent(models.Model):
    """Something a contact did, reported by another system (``POST /api/v1/events``):
    stored when received, routed to the journeys it concerns by ``journeys.routing`` in
    the order stored (``routed_at`` set then)."""

    contact = models.ForeignKey("campaigns.Contact", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    properties = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)
    routed_at = models.DateTimeField(null=True, blank=True)
    api_key = models.ForeignKey(
        "delivery.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The key and the caller's idempotency key: a retried event is stored once.
    dedupe_key = models.CharField(max_length=300, null=True, blank=True, unique=True)

    class Meta:
        indexes = [
            # The router's: events not routed yet, in the order stored.
            models.Index(
                fields=("id",),
                condition=models.Q(routed_at__isnull=True),
                name="contact_event_unrouted_idx",
            ),
            # Conversions (a journey's goal) and the customer page.
            models.Index(fields=("contact", "name", "occurred_at"), name="contact_event_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} by {self.contact_id}"


class JourneySegmentMember(models.Model):
    """Who fitted a segment-entered journey's segment at its last check: the next check's
    newcomers are those who fit then and are not here."""

    journey = models.ForeignKey(Journey, on_delete=models.CASCADE, related_name="+")
    contact = models.ForeignKey("campaigns.Contact", on_delete=models.CASCADE, related_name="+")
    since = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("journey", "contact"), name="journey_segment_member_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contact_id} fits journey {self.journey_id}"
