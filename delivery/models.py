"""Getting messages out: one Message row per recipient, the source of truth for its send."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from whatsblast.core.secrets import SecretField


class MessageStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    DELIVERED = "delivered", "Delivered"
    READ = "read", "Read"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown (being reconciled)"
    DEAD = "dead", "Dead-lettered"
    SKIPPED = "skipped", "Skipped"
    CANCELLED = "cancelled", "Cancelled"


# Webhook rank: a status update applies only when it ranks above the current one, so a late
# or duplicated callback never moves a message backwards.
STATUS_RANK: dict[str, int] = {
    MessageStatus.SENDING: 0,
    MessageStatus.SENT: 1,
    MessageStatus.FAILED: 2,
    MessageStatus.DELIVERED: 3,
    MessageStatus.READ: 4,
}

# States a message can still leave on its own (the engine or a webhook will move it).
OPEN_STATUSES = (MessageStatus.PENDING, MessageStatus.SENDING, MessageStatus.UNKNOWN)


class MessageKind(models.TextChoices):
    CAMPAIGN = "campaign", "Campaign"
    TRANSACTIONAL = "transactional", "Transactional"


class Message(models.Model):
    """One send: a campaign recipient or a transactional message."""

    kind = models.CharField(
        max_length=16, choices=MessageKind.choices, default=MessageKind.CAMPAIGN
    )
    # No index of its own: message_campaign_status_idx (campaign, send_status) leads with it
    # and serves every lookup by campaign. Every index here is written on each insert and on
    # each change of an indexed column.
    campaign = models.ForeignKey(
        "campaigns.Campaign",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="messages",
        db_index=False,
    )
    contact = models.ForeignKey(
        "campaigns.Contact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    phone_number = models.ForeignKey(
        "campaigns.PhoneNumber", on_delete=models.PROTECT, related_name="messages"
    )
    template = models.ForeignKey(
        "campaigns.Template", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The phone in E.164 form, or the business-scoped user id of a contact known only by
    # it (the client sends that as Meta's ``recipient``); as long as Contact.user_id.
    to = models.CharField(
        max_length=140, help_text="Recipient: E.164 phone, or the WhatsApp user id"
    )
    # Where the accepted send went: "" (POST /messages, as chosen), "marketing_messages"
    # (the Marketing Messages API), or "rerouted_to_marketing_messages" /
    # "rerouted_to_messages" when the first endpoint refused it (131063 / 131055) and the
    # other took it (delivery.engine.routes).
    send_route = models.CharField(max_length=32, blank=True, db_default="")
    # The A/B variant's position (campaigns.CampaignVariant) this row was sent, or null: no
    # test, or a remainder row waiting for (then given) the winner.
    variant = models.PositiveSmallIntegerField(null=True, blank=True)
    # Rendered template parameters: {"header": [...], "body": [...] or {...}, "buttons": [...]}
    params = models.JSONField(default=dict, blank=True)
    text = models.TextField(blank=True, help_text="Free-form text (service window only)")
    status = models.CharField(
        max_length=16, choices=MessageStatus.choices, default=MessageStatus.PENDING
    )
    # `status` with the receipts (delivered, read) folded into `sent`: where the send itself
    # stands. Every index that needs a status keys on this column, never on `status`, so a
    # delivery receipt changes no indexed column and its UPDATE is HOT (the heap tuple
    # rewritten in place on its page, no index entry written), about half the cost of the
    # webhook applier's UPDATE, and two statuses in three are receipts. Queries that
    # select by a state other than delivered/read filter on it to reach those indexes.
    send_status = models.GeneratedField(
        expression=models.Case(
            models.When(
                status__in=(MessageStatus.DELIVERED, MessageStatus.READ),
                then=models.Value(MessageStatus.SENT.value),
            ),
            default=models.F("status"),
        ),
        output_field=models.CharField(max_length=16),
        db_persist=True,
    )
    skip_reason = models.CharField(max_length=200, blank=True)
    attempt = models.PositiveSmallIntegerField(default=0)
    pair_limit_hits = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Unique by the constraint below, which (unlike unique=True) adds no second,
    # pattern-ops index for LIKE searches nothing makes.
    wamid = models.CharField(max_length=128, null=True, blank=True)
    wa_id = models.CharField(max_length=32, blank=True)
    # Meta answered the send with ``message_status: held_for_quality_assessment``: template
    # (or portfolio) pacing holds it, to deliver it later or drop it with 132015. Written
    # with the wamid by the batch that records the send; one byte a row, and a constant
    # database default, so adding it rewrote no row (migration 0014).
    held_for_quality_assessment = models.BooleanField(default=False, db_default=False)
    last_error_code = models.IntegerField(null=True, blank=True)
    last_error_title = models.CharField(max_length=500, blank=True)
    last_error_details = models.TextField(blank=True)
    # One entry per failed attempt: {"at", "attempt", "code", "title", "details", "outcome"}.
    error_history = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    # From status webhooks: which conversation the message opened and how it is billed.
    conversation_id = models.CharField(max_length=128, blank=True)
    pricing_category = models.CharField(max_length=32, blank=True)
    billable = models.BooleanField(null=True, blank=True)
    # Per-message pricing (since July 2025): "PMP", and regular / free_customer_service /
    # free_entry_point.
    pricing_model = models.CharField(max_length=16, blank=True, db_default="")
    pricing_type = models.CharField(max_length=32, blank=True, db_default="")
    # Transactional API sends: which key asked, under which Idempotency-Key, with which body
    # (SHA-256 of its canonical JSON), so a retried request finds its message again.
    # No full index: campaign rows (nearly all of them) leave it NULL; the partial index
    # below covers API sends only.
    api_key = models.ForeignKey(
        "delivery.ApiKey",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    request_sha256 = models.CharField(max_length=64, blank=True)
    # A journey's send (journeys.sends): the instance and the step that made it. No foreign
    # key (delivery sits below journeys); nullable without a default, so adding them wrote
    # no row. At most one message per instance and step: the unique index below.
    journey_instance_id = models.BigIntegerField(null=True, blank=True)
    journey_step = models.CharField(max_length=40, blank=True, db_default="")
    # Sent while the person's 24-hour window with the number was open (set by the frequency
    # cap as it admits the row): Meta does not count such a marketing message against the
    # person, and neither does the cap. A constant database default: no row rewritten.
    in_service_window = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("wamid",), name="delivery_message_wamid_key"),
            # A recipient gets a campaign at most once, whatever happens to the launch. A
            # journey's step campaign sends to a person once per instance (below) instead:
            # a person re-entering the journey is sent again.
            models.UniqueConstraint(
                fields=("campaign", "to"),
                condition=models.Q(campaign__isnull=False, journey_instance_id__isnull=True),
                name="message_unique_recipient_per_campaign",
            ),
            # Each step of a journey fires at most once per instance, whatever retries.
            models.UniqueConstraint(
                fields=("journey_instance_id", "journey_step"),
                condition=models.Q(journey_instance_id__isnull=False),
                name="message_unique_journey_step",
            ),
            # Two concurrent retries of one API request: the second INSERT fails here and
            # finds the first one's message instead of sending twice.
            models.UniqueConstraint(
                fields=("api_key", "idempotency_key"),
                condition=models.Q(idempotency_key__isnull=False),
                name="message_unique_idempotency_key_per_api_key",
            ),
        ]
        indexes = [
            # The claim query's index: only pending rows, so it stays small however large
            # the table grows.
            # A number's sender claims each campaign's rows for that number (a campaign
            # may send from a pool of numbers).
            models.Index(
                fields=("campaign", "phone_number", "next_attempt_at"),
                condition=models.Q(send_status="pending"),
                name="message_pending_claim_idx",
            ),
            models.Index(
                fields=("phone_number", "next_attempt_at"),
                condition=models.Q(send_status="pending", kind="transactional"),
                name="message_pending_txn_idx",
            ),
            # The reconciler's index: rows in doubt.
            models.Index(
                fields=("claimed_at",),
                condition=models.Q(send_status__in=("sending", "unknown")),
                name="message_in_doubt_idx",
            ),
            models.Index(fields=("campaign", "send_status"), name="message_campaign_status_idx"),
            # An A/B test's arms (delivery.campaigns.ab_tests reads each arm's figures every
            # half minute while it waits to decide): only rows in an arm, the test's share,
            # so the remainder and every campaign without a test add nothing to it.
            models.Index(
                fields=("campaign", "variant"),
                condition=models.Q(variant__isnull=False),
                name="message_ab_arm_idx",
            ),
            # The quality guard's window: a campaign's latest settled sends, newest first
            # (delivery/campaigns/guard.py, every few seconds per running campaign). Without
            # it the planner walks the primary key backwards through every later campaign's
            # rows (800k removed by the filter, 799 ms at 1.2M messages); with it, 500 index
            # entries (0.5 ms). Partial: pending rows (a launch's whole INSERT) stay out.
            models.Index(
                fields=("campaign", "id"),
                condition=models.Q(send_status__in=("sent", "failed")),
                name="message_settled_recent_idx",
            ),
            models.Index(
                fields=("api_key",),
                condition=models.Q(api_key__isnull=False),
                name="message_api_key_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"message {self.pk} to {self.to} ({self.status})"

    @property
    def callback_data(self) -> str:
        """What rides in ``biz_opaque_callback_data`` so a status webhook finds this row."""
        return f"wb:{self.pk}"


class CampaignStatusTotal(models.Model):
    """How many of a campaign's messages are in each status, as of the last fold.

    Kept by PostgreSQL, not by the code that writes messages: statement-level triggers on
    ``delivery_message`` (migration 0007) append each statement's net change per campaign
    and status to ``CampaignStatusDelta``, in the writer's own transaction, so the counts
    are exact at any snapshot. ``delivery.campaigns.status_counts`` folds the deltas into
    these totals on the tick and reads totals plus pending deltas. No foreign key: a
    campaign's deleted messages still subtract while the campaign goes.
    """

    campaign_id = models.BigIntegerField()
    status = models.CharField(max_length=16)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("campaign_id", "status"), name="campaign_status_total_unique"
            )
        ]

    def __str__(self) -> str:
        return f"campaign {self.campaign_id}: {self.n} {self.status}"


class CampaignStatusDelta(models.Model):
    """One statement's net change to a campaign's count in one status (appended by the
    triggers, folded into ``CampaignStatusTotal``). Appending, never updating, keeps the
    senders and the webhook applier from waiting on one another's counter rows."""

    campaign_id = models.BigIntegerField(db_index=True)
    status = models.CharField(max_length=16)
    n = models.BigIntegerField()

    def __str__(self) -> str:
        return f"campaign {self.campaign_id}: {self.n:+} {self.status}"


class PoolHome(models.Model):
    """The number of an account a contact is sent from whenever a sender pool sends to it.

    Given by the first pool launch that reaches the contact and kept after it, so every
    later campaign of the account's pools sends from the same number (the contact's
    replies stay in one conversation), whatever the audience, even when numbers join or
    leave the pool; a home that has left the pool is given anew. Written only by
    ``delivery.campaigns.pools``.
    """

    contact = models.ForeignKey("campaigns.Contact", on_delete=models.CASCADE, related_name="+")
    account = models.ForeignKey(
        "campaigns.BusinessAccount", on_delete=models.CASCADE, related_name="+"
    )
    phone_number = models.ForeignKey(
        "campaigns.PhoneNumber", on_delete=models.CASCADE, related_name="+"
    )
    assigned_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("contact", "account"), name="pool_home_one_per_contact_and_account"
            ),
        ]

    def __str__(self) -> str:
        return f"contact {self.contact_id} sent from {self.phone_number_id}"


class ServiceWindow(models.Model):
    """When a user last wrote to one of the business numbers.

    Meta lets a number send free-form messages to a user only within 24 h of that user's
    last message to it (the customer-service window). Webhooks record every inbound
    message here (``delivery.service_windows``); the API checks it before a text send.
    """

    phone_number = models.ForeignKey(
        "campaigns.PhoneNumber", on_delete=models.CASCADE, related_name="+"
    )
    # The user as Meta names them: E.164 phone, or a business-scoped user id.
    user = models.CharField(max_length=140)
    last_inbound_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("phone_number", "user"), name="service_window_one_per_user_and_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} wrote to {self.phone_number_id} at {self.last_inbound_at}"


class MarketingHold(models.Model):
    """Meta's per-user marketing limit (131049) reached for a contact: no marketing step
    of a journey goes to them before ``until`` (delivery.marketing_holds). Meta asks for
    24 h at least; an earlier retry can keep the user blocked longer."""

    contact = models.OneToOneField(
        "campaigns.Contact", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    until = models.DateTimeField()
    since = models.DateTimeField()
    message_id = models.BigIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"no marketing to {self.contact_id} before {self.until}"


class DeadLetterStatus(models.TextChoices):
    OPEN = "open", "Open"
    REQUEUED = "requeued", "Requeued"
    DISCARDED = "discarded", "Discarded"


class DeadLetter(models.Model):
    """A message whose retries ran out, kept for support to requeue or discard."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="dead_letters")
    campaign = models.ForeignKey(
        "campaigns.Campaign", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    phone_number = models.ForeignKey(
        "campaigns.PhoneNumber", on_delete=models.PROTECT, related_name="+"
    )
    error_code = models.IntegerField(null=True, blank=True)
    error_title = models.CharField(max_length=500, blank=True)
    payload = models.JSONField(default=dict)
    attempts = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=DeadLetterStatus.choices, default=DeadLetterStatus.OPEN
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            # A message may die again after a requeue; only one open entry at a time.
            models.UniqueConstraint(
                fields=("message",),
                condition=models.Q(status="open"),
                name="deadletter_one_open_per_message",
            ),
        ]
        indexes = [
            models.Index(fields=("status", "-created_at"), name="deadletter_status_idx"),
            models.Index(fields=("error_code",), name="deadletter_code_idx"),
            # The support list's default order and its date drill-down.
            models.Index(fields=("-created_at",), name="deadletter_created_idx"),
        ]
        permissions = [
            ("requeue_deadletter", "Can requeue dead letters (fresh attempts)"),
            ("discard_deadletter", "Can discard dead letters"),
        ]

    def __str__(self) -> str:
        return f"dead letter for message {self.message_id}"


class SupportActionKind(models.TextChoices):
    REQUEUED = "requeued", "Requeued"
    DISCARDED = "discarded", "Discarded"


class SupportAction(models.Model):
    """The audit trail of dead letters: who requeued or discarded one, when, and why."""

    dead_letter = models.ForeignKey(DeadLetter, on_delete=models.CASCADE, related_name="actions")
    action = models.CharField(max_length=16, choices=SupportActionKind.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept apart from the user row: the trail still names who it was once the account is gone.
    username = models.CharField(max_length=150)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.username} {self.action} dead letter {self.dead_letter_id}"


class ApiScope(models.TextChoices):
    SEND = "send", "send transactional messages and read their status"
    CONTACTS = "contacts", "write contacts, lists and segments"
    CAMPAIGNS = "campaigns", "create and run campaigns, report conversions, manage events"
    READ = "read", "read contacts, lists, segments, templates and campaigns"


def api_scopes_default() -> list[str]:
    """Keys made before scopes existed sent transactional messages: that is what they keep."""
    return [ApiScope.SEND.value]


class ApiKey(models.Model):
    """A credential for the transactional API: stored hashed, scoped to phone numbers.

    The key handed out is ``wb_<prefix>_<secret>``. ``prefix`` is public and unique (it
    finds the row); only the SHA-256 of the whole key is stored, so a database leak gives
    nobody a working key. A plain hash is enough: the secret is 256 random bits, nothing a
    dictionary attack could guess, unlike a password.
    """

    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_sha256 = models.CharField(max_length=64, editable=False)
    # Explicit scope: a key with no numbers and all_numbers off may send nothing.
    phone_numbers = models.ManyToManyField(
        "campaigns.PhoneNumber", blank=True, related_name="api_keys"
    )
    all_numbers = models.BooleanField(
        default=False, help_text="May use every phone number, present and future."
    )
    requests_per_second = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="This key's request quota; empty means API_DEFAULT_REQUESTS_PER_SECOND.",
    )
    # What the key may do (delivery.api.scopes): send, contacts, campaigns, read.
    scopes = ArrayField(
        models.CharField(max_length=16, choices=ApiScope.choices),
        default=api_scopes_default,
        help_text="send: transactional messages; contacts: contacts, lists and segments; "
        "campaigns: campaigns, conversions and event subscriptions; read: read everything.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ("-created_at",)
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Click(models.Model):
    """A tap on a tracked link (delivery.engagement.clicks): stored before the redirect is
    answered. A link-preview fetcher's request is kept but marked, so people are counted
    apart from machines.

    The three relations have no foreign-key constraint in the database (``db_constraint``
    off). A constraint's check locks the row it points to (``SELECT … FOR KEY SHARE``) for
    every click inserted: the message, the contact and the campaign, one row that every
    click of a campaign locks, from each committer's transaction at once. Measured with the
    click batch statement alone (8 clicks a batch, 6 connections): 48 µs of PostgreSQL CPU
    per click with the constraints, 36 µs without. What they guarded is kept otherwise:
    the statement takes the three ids from the message row it reads in the same snapshot,
    and rows are deleted only through the ORM, whose ``on_delete`` (CASCADE, SET_NULL) is
    Django's own and needs no constraint. Only a message, contact or campaign deleted while
    a batch naming it commits can leave a click with an id that is gone (the readers join
    the message with a LEFT JOIN: such a click counts as if its message were still there).
    """

    message = models.ForeignKey(
        Message,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="clicks",
        db_constraint=False,
    )
    campaign = models.ForeignKey(
        "campaigns.Campaign",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="clicks",
        db_index=False,
        db_constraint=False,
    )
    contact = models.ForeignKey(
        "campaigns.Contact",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    clicked_at = models.DateTimeField()
    is_preview = models.BooleanField(default=False)
    user_agent = models.CharField(max_length=300, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=("campaign", "message"), name="click_campaign_message_idx"),
        ]

    def __str__(self) -> str:
        return f"click on message {self.message_id}"


class ConversionSource(models.TextChoices):
    API = "api", "API"
    UPLOAD = "upload", "File upload"


class Conversion(models.Model):
    """A purchase, sign-up or other outcome a customer's systems report
    (delivery.engagement.conversions), attributed to the campaign message that led to it."""

    contact = models.ForeignKey(
        "campaigns.Contact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # As reported: the phone (E.164) or WhatsApp user id the contact was named by.
    phone = models.CharField(max_length=32, blank=True)
    user_id = models.CharField(max_length=140, blank=True)
    event = models.CharField(max_length=100)
    value = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    occurred_at = models.DateTimeField()
    source = models.CharField(max_length=8, choices=ConversionSource.choices)
    # Whatever makes a reported conversion the same one again (the API key and the
    # caller's id or Idempotency-Key and position; an upload and its row): a repeat is
    # stored once.
    dedupe_key = models.CharField(max_length=300, unique=True)
    # The attribution: the message (and its campaign) the conversion is counted for, and
    # how: "delivered", "clicked", or "holdout" (a row deliberately not sent).
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    campaign = models.ForeignKey(
        "campaigns.Campaign",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversions",
        db_index=False,
    )
    attributed_by = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=("campaign", "occurred_at"), name="conversion_campaign_idx"),
            models.Index(fields=("contact", "occurred_at"), name="conversion_contact_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event} by {self.phone or self.user_id}"


class ApiCreated(models.Model):
    """The answer to a create that carried an Idempotency-Key, stored in the transaction that
    created the thing, so a retry is answered the same and creates nothing again."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    idempotency_key = models.CharField(max_length=255)
    operation = models.CharField(max_length=64)
    request_sha256 = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["api_key", "idempotency_key"], name="api_created_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.idempotency_key}"


class EventOutbox(models.Model):
    """An event as its change committed: written by triggers (migration 0020) in the same
    transaction as the change it reports, so a change and its event are committed together
    or not at all. The router (delivery.events.router) moves rows into ``Event`` in commit
    order and deletes them here; the table stays small."""

    event_id = models.UUIDField(db_default=models.Func(function="gen_random_uuid"))
    event_type = models.CharField(max_length=40)
    # The message the event is about (its order key), when there is one.
    message_id = models.BigIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField(db_default=models.Func(function="now"))
    data = models.JSONField()

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id}"


class Event(models.Model):
    """An event in the order subscribers get it: ``seq`` is given by the router, one
    transaction at a time, so no event can later appear below a subscriber's cursor."""

    seq = models.BigIntegerField(primary_key=True)
    # Random, given when the change committed, kept across retries; nothing looks an event
    # up by it, so it has no index: a B-tree over random UUIDs cost the router a quarter of
    # its time per event (a random page per insert).
    event_id = models.UUIDField()
    event_type = models.CharField(max_length=40)
    message_id = models.BigIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField()
    routed_at = models.DateTimeField(db_default=models.Func(function="now"))
    data = models.JSONField()

    def __str__(self) -> str:
        return f"{self.seq} {self.event_type}"


class EventSubscription(models.Model):
    """A URL that receives events (the ones in ``event_types``; empty: all), signed with
    ``secret``. ``cursor`` is the last event it acknowledged; the next batch starts after."""

    name = models.CharField(max_length=200)
    url = models.URLField(max_length=2000)
    secret = SecretField(help_text="Signs each delivery (HMAC-SHA256); shown once, at creation.")
    event_types = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    active = models.BooleanField(default=True)
    paused_reason = models.CharField(max_length=500, blank=True)
    cursor = models.BigIntegerField(default=0)
    # Set by the first failed delivery of the current run of failures; cleared on success.
    failing_since = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_default=models.Func(function="now"))
    last_error = models.CharField(max_length=500, blank=True)
    last_delivered_at = models.DateTimeField(null=True, blank=True)
    delivered_total = models.BigIntegerField(default=0)
    api_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "event subscription"

    def __str__(self) -> str:
        return self.name


class EventDeadLetter(models.Model):
    """An event a subscription could not take for ``EVENTS_RETRY_FOR``: set aside so the
    events after it flow, kept for a replay."""

    subscription = models.ForeignKey(
        EventSubscription, on_delete=models.CASCADE, related_name="dead_letters"
    )
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    failed_at = models.DateTimeField(auto_now_add=True)
    attempts = models.PositiveIntegerField()
    last_error = models.CharField(max_length=500, blank=True)
    replayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "event"], name="event_dead_letter_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.subscription_id} {self.event_id}"
