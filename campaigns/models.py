"""What to send and to whom: accounts, numbers, templates, contacts and campaigns."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from whatsblast.core.secrets import SecretField


class MessagingLimitTier(models.TextChoices):
    """Unique users a business portfolio may reach in a rolling 24 h (shared by its numbers)."""

    TIER_250 = "TIER_250", "250"
    TIER_2K = "TIER_2K", "2,000"
    TIER_10K = "TIER_10K", "10,000"
    TIER_100K = "TIER_100K", "100,000"
    TIER_UNLIMITED = "TIER_UNLIMITED", "Unlimited"


TIER_LIMITS: dict[str, int | None] = {
    MessagingLimitTier.TIER_250: 250,
    MessagingLimitTier.TIER_2K: 2_000,
    MessagingLimitTier.TIER_10K: 10_000,
    MessagingLimitTier.TIER_100K: 100_000,
    MessagingLimitTier.TIER_UNLIMITED: None,
}


class QualityRating(models.TextChoices):
    GREEN = "GREEN", "High"
    YELLOW = "YELLOW", "Medium"
    RED = "RED", "Low"
    UNKNOWN = "UNKNOWN", "Unknown"


class BusinessAccount(models.Model):
    """A WhatsApp Business Account (WABA) and the business portfolio it belongs to.

    Since October 2025 the messaging limit belongs to the portfolio and is shared by all of
    its numbers, so it lives here rather than on the phone number.
    """

    waba_id = models.CharField("WABA id", max_length=64, unique=True)
    business_id = models.CharField("business portfolio id", max_length=64, blank=True)
    name = models.CharField(max_length=200, blank=True)
    messaging_limit_tier = models.CharField(
        max_length=32, choices=MessagingLimitTier.choices, default=MessagingLimitTier.TIER_250
    )
    account_review_status = models.CharField(max_length=32, blank=True)
    # The Marketing Messages API (delivery.engine.routes): marketing templates go to
    # POST /{phone_number_id}/marketing_messages, everything else to /messages.
    marketing_messages_api = models.BooleanField(
        "send marketing templates through the Marketing Messages API",
        default=False,
        help_text="Meta's path for marketing: quality-based delivery, offers' time-to-live, "
        "click events. Needs the portfolio onboarded (status below).",
    )
    mm_product_policy = models.CharField(
        "if not onboarded",
        max_length=24,
        blank=True,
        choices=(
            ("", "Meta's default (deliver through Cloud API)"),
            ("CLOUD_API_FALLBACK", "Deliver through Cloud API"),
            ("STRICT", "Fail the send"),
        ),
        help_text="Meta's product_policy: what a marketing send does when the Marketing "
        "Messages API cannot take it.",
    )
    mm_activity_sharing = models.BooleanField(
        "share reads and clicks with Meta",
        null=True,
        blank=True,
        help_text="Meta's message_activity_sharing; unknown: the account's setting at Meta.",
    )
    # GET /{waba_id}?fields=marketing_messages_onboarding_status (ONBOARDED, ELIGIBLE, ...).
    mm_onboarding_status = models.CharField(
        "Marketing Messages API onboarding", max_length=48, blank=True
    )
    graph_read_at = models.DateTimeField("last read from Meta", null=True, blank=True)
    graph_error = models.CharField("last read error", max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name", "waba_id")

    def __str__(self) -> str:
        return self.name or self.waba_id

    @property
    def daily_unique_user_limit(self) -> int | None:
        """The tier as a number; ``None`` means unlimited. Unknown tiers count as the lowest."""
        return TIER_LIMITS.get(self.messaging_limit_tier, 250)


class PhoneNumber(models.Model):
    """A registered business phone number: the unit of Meta's throughput limit."""

    phone_number_id = models.CharField("phone number id", max_length=64, unique=True)
    display_phone_number = models.CharField(max_length=32)
    account = models.ForeignKey(
        BusinessAccount, on_delete=models.PROTECT, related_name="phone_numbers"
    )
    # Written in the admin, never shown back; never logged. The attribute is a Secret:
    # it prints as a mask, and only ``access_token.reveal()`` gives the token.
    access_token = SecretField()
    rate_per_second = models.PositiveIntegerField(
        "rate (msg/s)",
        default=80,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Meta's throughput for this number: 80 by default, up to 1,000.",
    )
    transactional_reserve = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.9)],
        help_text="Share of the rate that campaigns may never use, kept for transactional sends.",
    )
    effective_rate = models.FloatField(
        null=True,
        blank=True,
        help_text="Adaptive rate after throttling errors; empty means the configured rate.",
    )
    quality_rating = models.CharField(
        max_length=16, choices=QualityRating.choices, default=QualityRating.UNKNOWN
    )
    paused_until = models.DateTimeField(null=True, blank=True)
    paused_reason = models.CharField(max_length=500, blank=True)
    api_base_url = models.URLField(
        "API base URL", blank=True, help_text="Overrides WHATSAPP_API_BASE_URL for this number."
    )
    # Read from the Graph API (delivery.numbers.number_graph_read): never typed by hand.
    verified_name = models.CharField(max_length=200, blank=True)
    name_status = models.CharField(max_length=32, blank=True)
    throughput_level = models.CharField(max_length=32, blank=True)
    graph_read_at = models.DateTimeField("last read from Meta", null=True, blank=True)
    graph_error = models.CharField(
        "last read error", max_length=500, blank=True, help_text="Empty: the token works."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("display_phone_number",)
        constraints = [
            models.CheckConstraint(
                condition=models.Q(rate_per_second__gte=1, rate_per_second__lte=1000),
                name="phone_number_rate_in_meta_range",
            ),
            models.CheckConstraint(
                condition=models.Q(transactional_reserve__gte=0, transactional_reserve__lte=0.9),
                name="phone_number_reserve_fraction",
            ),
        ]

    def __str__(self) -> str:
        return self.display_phone_number


class TemplateCategory(models.TextChoices):
    MARKETING = "MARKETING", "Marketing"
    UTILITY = "UTILITY", "Utility"
    AUTHENTICATION = "AUTHENTICATION", "Authentication"


class TemplateStatus(models.TextChoices):
    APPROVED = "APPROVED", "Approved"
    PENDING = "PENDING", "Pending"
    REJECTED = "REJECTED", "Rejected"
    PAUSED = "PAUSED", "Paused"
    DISABLED = "DISABLED", "Disabled"
    DELETED = "DELETED", "Deleted"
    # Further states Meta's template listing reports; none of them can send.
    IN_APPEAL = "IN_APPEAL", "In appeal"
    PENDING_DELETION = "PENDING_DELETION", "Pending deletion"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED", "Limit exceeded"
    ARCHIVED = "ARCHIVED", "Archived"


class HeaderFormat(models.TextChoices):
    """A template header as Meta defines it; blank means the template has none."""

    NONE = "", "No header"
    TEXT = "TEXT", "Text"
    IMAGE = "IMAGE", "Image"
    VIDEO = "VIDEO", "Video"
    DOCUMENT = "DOCUMENT", "Document"
    LOCATION = "LOCATION", "Location"
    # A catalogue product (single-product templates, product-card carousels): the send
    # names it by its SKU (``product_retailer_id``) and catalogue id.
    PRODUCT = "PRODUCT", "Product"


class Template(models.Model):
    """A message template as Meta approved it, and the parameters a send must supply."""

    account = models.ForeignKey(BusinessAccount, on_delete=models.PROTECT, related_name="templates")
    meta_template_id = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=512)
    language = models.CharField(max_length=16)
    category = models.CharField(
        max_length=32, choices=TemplateCategory.choices, default=TemplateCategory.MARKETING
    )
    status = models.CharField(
        max_length=32, choices=TemplateStatus.choices, default=TemplateStatus.APPROVED
    )
    status_reason = models.CharField(max_length=500, blank=True)
    # From Meta's listing and template callbacks.
    parameter_format = models.CharField(max_length=16, blank=True)  # POSITIONAL | NAMED
    rejected_reason = models.CharField(max_length=200, blank=True)
    quality_score = models.CharField(max_length=16, blank=True)  # GREEN | YELLOW | RED | UNKNOWN
    previous_category = models.CharField(max_length=32, blank=True)
    body_text = models.TextField(blank=True)
    # Positional templates ({{1}}, {{2}}) use the count; named ones list their names.
    body_param_count = models.PositiveSmallIntegerField(default=0)
    body_param_names = models.JSONField(default=list, blank=True)
    # Meta's examples: ["Asha", "SALE20"] (positional) or {"first_name": "Asha"} (named).
    body_examples = models.JSONField(default=list, blank=True)
    header_format = models.CharField(
        max_length=16, choices=HeaderFormat.choices, default=HeaderFormat.NONE, blank=True
    )
    header_text = models.CharField(max_length=200, blank=True)
    # The placeholder of a TEXT header ("1" or "name"); media headers always take one.
    header_param = models.CharField(max_length=64, blank=True)
    header_example = models.TextField(blank=True)
    # [{"index": 0, "type": "URL", "text": "Shop", "url": ".../{{1}}", "sub_type": "url",
    #   "param": "required", "example": "summer"}]; see campaigns.catalogue.components.
    buttons = models.JSONField(default=list, blank=True)
    # A carousel's cards as parsed, each a header, body and buttons in the shape above:
    # [{"header_format": "IMAGE", "header_example": "...", "body_text": "...",
    #   "body_param_count": 1, "body_param_names": [], "body_examples": ["..."],
    #   "buttons": [...]}]; [] for templates without a carousel.
    cards = models.JSONField(default=list, blank=True)
    # A limited-time offer: {"text": "Expiring offer!", "has_expiration": true}; {} if none.
    offer = models.JSONField(default=dict, blank=True)
    # How long Meta tries to deliver a send (``message_send_ttl_seconds``); for marketing
    # templates honoured only through the Marketing Messages API. None: Meta's default.
    message_send_ttl_seconds = models.PositiveIntegerField(
        "time to live (s)", null=True, blank=True
    )
    # Meta's components as last listed (or as typed in the admin).
    components = models.JSONField(default=list, blank=True)
    # Set by the catalogue sync: when Meta last listed it, and when it stopped listing it
    # (the row stays: campaigns and messages refer to it).
    synced_at = models.DateTimeField(null=True, blank=True)
    removed_upstream_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name", "language")
        constraints = [
            models.UniqueConstraint(
                fields=("account", "name", "language"), name="template_unique_per_account"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.language})"

    @property
    def header_takes_param(self) -> bool:
        """Whether a send must supply the header: media always, text only with a {{param}}."""
        if self.header_format == HeaderFormat.TEXT:
            return bool(self.header_param)
        return self.header_format in (
            HeaderFormat.IMAGE,
            HeaderFormat.VIDEO,
            HeaderFormat.DOCUMENT,
            HeaderFormat.LOCATION,
            HeaderFormat.PRODUCT,
        )


class ContactList(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    # A suppression list (staff, legal requests, …) is taken out of every campaign's
    # audience, whatever its lists and segments (delivery.campaigns.audience).
    suppression = models.BooleanField(
        "suppression list",
        default=False,
        help_text="Its contacts are left out of every campaign (staff, legal requests).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Contact(models.Model):
    """A person, identified by their phone number in E.164 form, their business-scoped user
    id (BSUID), or both: replies and opt-outs match either, and sends go to the phone when
    there is one, else to the user id (Meta's ``recipient``)."""

    phone = models.CharField(
        max_length=20,
        unique=True,
        null=True,
        blank=True,
        help_text="E.164, e.g. +5511999990000. Empty for a user known only by their user id.",
    )
    user_id = models.CharField(
        "WhatsApp user id",
        max_length=140,
        null=True,
        blank=True,
        unique=True,
        help_text="Business-scoped user id (e.g. US.13491208655302741918), learnt from Meta.",
    )
    # Both learnt with the user id, from the same callbacks (value-level contacts[]), and
    # only ever for the user id the contact holds. Not unique: a parent id is shared by the
    # user's ids across a business's portfolios, and a username may be given up and taken.
    parent_user_id = models.CharField(
        "WhatsApp parent user id",
        max_length=140,
        null=True,
        blank=True,
        help_text="Parent business-scoped user id (e.g. US.ENT.11815799212886844830), from Meta.",
    )
    username = models.CharField(
        "WhatsApp username",
        max_length=100,
        null=True,
        blank=True,
        help_text="The user's WhatsApp username, without its leading @, as Meta last gave it.",
    )
    name = models.CharField(max_length=200, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    opted_in_at = models.DateTimeField(null=True, blank=True)
    opted_out_at = models.DateTimeField(null=True, blank=True)
    # How the opt-out came (a STOP reply, the user's WhatsApp setting, Meta's 131050 on a
    # send), written with opted_out_at by campaigns.audience.opt_outs; "" when set by hand.
    opted_out_reason = models.CharField(
        "opt-out reason", max_length=200, blank=True, default="", db_default=""
    )
    lists = models.ManyToManyField(ContactList, through="ListMembership", related_name="contacts")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("phone", "user_id")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(phone__isnull=True)
                | models.Q(phone__regex=r"^\+[1-9][0-9]{6,14}$"),
                name="contact_phone_is_e164",
            ),
            models.CheckConstraint(
                condition=models.Q(phone__isnull=False) | models.Q(user_id__isnull=False),
                name="contact_has_phone_or_user_id",
                violation_error_message="A contact needs a phone or a WhatsApp user id.",
            ),
        ]

    def __str__(self) -> str:
        return self.phone or self.user_id or f"contact {self.pk}"

    @property
    def recipient(self) -> str:
        """Where a send goes: the phone when known (Meta recommends it), else the user id."""
        return self.phone or self.user_id or ""

    def field_value(self, field: str) -> Any:
        """A mappable field: ``phone``, ``name`` or any key of ``attributes``."""
        if field in ("phone", "name"):
            return getattr(self, field)
        return self.attributes.get(field)


class Segment(models.Model):
    """A saved, named rule over contacts, evaluated each time it is used (the contract and
    the checks: ``delivery.segments.rules``; the SQL: ``delivery.segments.sql``)."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    rules = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class ListMembership(models.Model):
    contact_list = models.ForeignKey(ContactList, on_delete=models.CASCADE)
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE)
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("contact_list", "contact"), name="list_membership_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contact_id} in {self.contact_list_id}"


class CampaignStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    SCHEDULED = "scheduled", "Scheduled"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"


class AmbiguousSendPolicy(models.TextChoices):
    """What to do with a send that may or may not have reached Meta, once no evidence came."""

    RESEND = "resend", "Resend (at least once)"
    FAIL = "fail", "Mark failed (at most once)"


class CanaryState(models.TextChoices):
    """A canary sends to the first recipients, holds the rest, and judges the failure rate."""

    NONE = "", "No canary"
    TESTING = "testing", "Testing"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"


class AbMetric(models.TextChoices):
    READ = "read", "Read rate"
    CLICK = "click", "Click rate"
    REPLY = "reply", "Reply rate"
    CONVERSION = "conversion", "Conversion rate"


class AbState(models.TextChoices):
    NONE = "", "No A/B test"
    TESTING = "testing", "Testing"
    WAITING_PICK = "waiting_pick", "Waiting for the marketer's pick"
    DECIDED = "decided", "Winner sent to the rest"


class CampaignKind(models.TextChoices):
    """What made the campaign: a person (or the API), a journey's send step (it runs while
    the journey is live and never completes on its own), or a recurring campaign's run."""

    CAMPAIGN = "campaign", "Campaign"
    JOURNEY_STEP = "journey_step", "A journey's send step"
    RECURRING_RUN = "recurring_run", "A recurring campaign's run"


class Campaign(models.Model):
    name = models.CharField(max_length=200)
    kind = models.CharField(
        max_length=16,
        choices=CampaignKind.choices,
        default=CampaignKind.CAMPAIGN,
        db_default=CampaignKind.CAMPAIGN,
    )
    phone_number = models.ForeignKey(
        PhoneNumber, on_delete=models.PROTECT, related_name="campaigns"
    )
    template = models.ForeignKey(Template, on_delete=models.PROTECT, related_name="campaigns")
    # The audience (delivery.campaigns.audience): everyone on these lists or in these
    # segments, less the excluded lists and segments and every suppression list.
    lists = models.ManyToManyField(ContactList, related_name="campaigns", blank=True)
    segments = models.ManyToManyField(Segment, related_name="campaigns", blank=True)
    exclude_lists = models.ManyToManyField(
        ContactList,
        related_name="excluded_from",
        blank=True,
        verbose_name="leave out lists",
    )
    exclude_segments = models.ManyToManyField(
        Segment,
        related_name="excluded_from",
        blank=True,
        verbose_name="leave out segments",
    )
    # The marketing frequency cap (delivery.campaigns.frequency_cap): '' follows
    # settings.MARKETING_FREQUENCY_CAP, "off" sends regardless, "N/Dd" (or "N/Hh") allows at
    # most N marketing templates per contact in any rolling D days (H hours).
    frequency_cap = models.CharField(
        max_length=16,
        blank=True,
        help_text='At most N marketing messages per contact in D days, as "1/7d"; '
        'blank: the site\'s default; "off": no cap.',
    )
    frequency_cap_defer = models.BooleanField(
        "defer capped recipients",
        default=False,
        help_text="Send to a capped recipient once the cap allows (inside the send window) "
        "instead of skipping them.",
    )
    # One campaign in many languages (delivery.campaigns.languages): each recipient gets the
    # approved version of the template's name in their language, read from a contact
    # field, else from their number's country; the rest get the fallback, or are skipped.
    languages = models.BooleanField(
        "send each recipient their language",
        default=False,
        help_text="Send the approved version of this template in each recipient's language.",
    )
    language_field = models.CharField(
        max_length=100,
        default="language",
        blank=True,
        help_text="Contact field holding the language (pt_BR, pt-BR or pt); else the "
        "number's country decides.",
    )
    language_fallback = models.CharField(
        max_length=16,
        blank=True,
        help_text="Language for recipients with no approved match; empty skips them.",
    )
    # Leave out everyone these campaigns reached (sent, delivered or read): a recurring
    # campaign's runs "only for people no earlier run reached" (delivery.campaigns.audience).
    exclude_reached_campaigns = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="+",
        verbose_name="leave out people these campaigns reached",
    )
    # The campaign whose report this one follows up (campaigns.follow_ups).
    follow_up_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="follow_ups"
    )
    # A sender pool: further numbers of the same account to send from. Each recipient is
    # given one number of the pool at launch (by a hash of their phone, in proportion to
    # the numbers' rates) and always sent from it, so their replies land in one thread.
    pool_numbers = models.ManyToManyField(
        PhoneNumber,
        blank=True,
        related_name="pooled_campaigns",
        verbose_name="also send from",
        help_text="Other numbers of the same account; each recipient always gets one number.",
    )
    # Campaigns sending from one number at once share its rate in proportion to this.
    share_weight = models.PositiveSmallIntegerField(
        "share of the number",
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="When several campaigns send from one number at once, each gets a share "
        "of its rate in proportion to this weight (1 each by default).",
    )
    # {"body": {"1": {"field": "name"}, "2": {"value": "SALE20"}}, ...}
    param_mapping = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=CampaignStatus.choices, default=CampaignStatus.DRAFT
    )
    status_reason = models.CharField(max_length=500, blank=True)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # When the campaign first finished. A requeue or a retry of failed rows reopens it and
    # moves ``completed_at`` to when those rows settle; the run's own end and duration
    # stay these.
    first_completed_at = models.DateTimeField(null=True, blank=True)
    max_attempts = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    ambiguous_policy = models.CharField(
        max_length=16, choices=AmbiguousSendPolicy.choices, default=AmbiguousSendPolicy.RESEND
    )
    # Daily send window in each recipient's local time; both empty means any time. A start
    # after the end wraps midnight (22:00-06:00). See campaigns.windows.daily.
    window_start = models.TimeField(null=True, blank=True)
    window_end = models.TimeField(null=True, blank=True)
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        help_text="IANA zone for recipients whose number gives none (or several); blank: UTC.",
    )
    time_zone_attribute = models.CharField(
        max_length=64,
        blank=True,
        default="timezone",
        help_text="Contact attribute holding an IANA zone that overrides the number's zone.",
    )
    # Optional canary (delivery.campaigns.canary): send to the first canary_size
    # recipients, hold the others, and continue only if at most canary_max_failure_rate of
    # those failed.
    canary_size = models.PositiveIntegerField(
        default=0, help_text="Recipients in the canary; 0 sends to everyone at once."
    )
    canary_max_failure_rate = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of canary sends that may fail (0.05 = 5 %) for the rest to follow.",
    )
    canary_state = models.CharField(
        max_length=16, choices=CanaryState.choices, default=CanaryState.NONE, blank=True
    )
    # The quality guard (delivery.campaigns.guard) over the whole run: over its latest
    # guard_window_sends sends, the share answered by an opt-out (a STOP, a user_preferences
    # stop, a 131050) or a block-like failure (131026); past guard_slow_rate the campaign
    # slows, past guard_pause_rate it pauses with the reason. It judges once
    # guard_min_sample sends are in the window.
    guard_enabled = models.BooleanField("quality guard", default=True)
    guard_window_sends = models.PositiveIntegerField(
        default=500,
        validators=[MinValueValidator(10), MaxValueValidator(100_000)],
        help_text="The latest sends the guard judges.",
    )
    guard_min_sample = models.PositiveIntegerField(
        default=100, help_text="Sends in the window before the guard judges."
    )
    guard_slow_rate = models.FloatField(
        default=0.02,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Opt-out + block rate (0.02 = 2 %) that slows the campaign.",
    )
    guard_pause_rate = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Opt-out + block rate (0.05 = 5 %) that pauses the campaign.",
    )
    guard_slow_per_second = models.FloatField(
        default=2.0,
        validators=[MinValueValidator(0.1)],
        help_text="Sends per second while slowed.",
    )
    guard_pause_quality = models.CharField(
        max_length=16,
        choices=QualityRating.choices,
        default=QualityRating.RED,
        blank=True,
        help_text="The number's quality rating that pauses the campaign (blank: never).",
    )
    # Set by the guard: the rate cap in force (null: none) and why; it judges sends since
    # guard_since (a resume or new thresholds start a fresh window).
    guard_rate_cap = models.FloatField(null=True, blank=True)
    guard_reason = models.CharField(max_length=500, blank=True)
    guard_since = models.DateTimeField(null=True, blank=True)
    # Engagement (delivery.engagement). A tracked link: a URL button whose approved URL is
    # CLICK_BASE_URL/{{1}}, or a body parameter, mapped to the click source, carries a
    # per-recipient token; a click on it is stored and redirected here, the contact's
    # fields ({{city}}) filled in and, when asked, UTM parameters added.
    link_destination = models.CharField(
        "tracked link goes to",
        max_length=2000,
        blank=True,
        help_text="Where a tracked link sends people, e.g. https://shop.example.com/sale?"
        "c={{city}}; {{field}} puts in the contact's field.",
    )
    link_utm = models.BooleanField(
        "add UTM parameters",
        default=True,
        help_text="Add utm_source=whatsapp, utm_medium=message, utm_campaign and utm_content "
        "(the A/B variant) to the destination.",
    )
    # A holdout: this share of the eligible audience is deliberately not sent (rows
    # skipped as "holdout"), so conversions can be compared (lift).
    holdout_percent = models.FloatField(
        "holdout (%)",
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(50.0)],
        help_text="Share of the audience deliberately not sent, to measure lift (0: none).",
    )
    attribution_days = models.PositiveSmallIntegerField(
        "attribution window (days)",
        default=7,
        validators=[MinValueValidator(1), MaxValueValidator(90)],
        help_text="A conversion counts for this campaign when it comes within this many days "
        "of the contact's delivered (or clicked) message.",
    )
    # An A/B test (delivery.campaigns.ab_launch, ab_tests): the campaign's variants (2-5) each go to
    # an even part of ab_test_percent of the audience; the rest is held until the winner
    # by ab_metric is decided (after ab_decide_after_hours, and ab_decide_min_sample sends
    # per variant), then sent the winner: automatically, or when the marketer picks.
    ab_test_percent = models.FloatField(
        "A/B test share (%)",
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(100.0)],
        help_text="Share of the audience split evenly between the variants; 0: no A/B test, "
        "100: no remainder.",
    )
    ab_metric = models.CharField(
        "winning metric", max_length=16, choices=AbMetric.choices, default=AbMetric.READ
    )
    ab_decide_after_hours = models.FloatField(
        "decide after (hours)",
        default=4.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(24.0 * 30)],
    )
    ab_decide_min_sample = models.PositiveIntegerField(
        "sends per variant before deciding", default=100
    )
    ab_auto_winner = models.BooleanField(
        "send the winner automatically",
        default=True,
        help_text="Off: the marketer picks the winner on the report.",
    )
    ab_state = models.CharField(
        max_length=16, choices=AbState.choices, default=AbState.NONE, blank=True
    )
    ab_winner = models.ForeignKey(
        "CampaignVariant", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ab_decided_at = models.DateTimeField(null=True, blank=True)
    ab_decision = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-created_at",)
        indexes = [models.Index(fields=("status",), name="campaign_status_idx")]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(window_start__isnull=True, window_end__isnull=True)
                    | (
                        models.Q(window_start__isnull=False, window_end__isnull=False)
                        & ~models.Q(window_start=models.F("window_end"))
                    )
                ),
                name="campaign_window_both_or_neither",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class CampaignVariant(models.Model):
    """One arm of a campaign's A/B test: a template and its mapping (the same template with
    another mapping is a variant too)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="variants")
    # 0-4, shown as A-E; a message's ``variant`` is this number.
    position = models.PositiveSmallIntegerField(validators=[MaxValueValidator(4)])
    template = models.ForeignKey(Template, on_delete=models.PROTECT, related_name="+")
    param_mapping = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("campaign", "position")
        constraints = [
            models.UniqueConstraint(
                fields=("campaign", "position"), name="campaign_variant_position_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"variant {self.label}: {self.template}"

    @property
    def label(self) -> str:
        return "ABCDE"[self.position]


class ContactUploadStatus(models.TextChoices):
    MAPPING = "mapping", "Waiting for the column choice"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Importing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class DuplicatePolicy(models.TextChoices):
    """What an import does with a number the file has on more than one row."""

    LAST = "last", "Last row wins"
    FIRST = "first", "First row wins"
    REJECT = "reject", "Reject repeated numbers"


class ContactUpload(models.Model):
    """A contact file uploaded in the admin, imported into one list (campaigns.audience.uploads).

    The file lives under ``settings.CONTACT_UPLOAD_DIR`` as ``stored_name`` until the import
    succeeds; its rejected rows stay there as ``rejects_name`` for download.
    """

    contact_list = models.ForeignKey(ContactList, on_delete=models.CASCADE, related_name="uploads")
    original_name = models.CharField(max_length=255)
    stored_name = models.CharField(max_length=100, editable=False)
    size_bytes = models.BigIntegerField(default=0)
    file_format = models.CharField(max_length=8, blank=True)
    # From the line count (CSV) or the sheet's dimension (XLSX): for the progress bar only.
    rows_estimate = models.PositiveIntegerField(null=True, blank=True)
    region = models.CharField(
        "default country", max_length=2, blank=True, help_text="For numbers without +country."
    )
    phone_column = models.CharField(max_length=200, blank=True)
    name_column = models.CharField(max_length=200, blank=True)
    # The other columns kept as contact attributes.
    attribute_columns = models.JSONField(default=list, blank=True)
    duplicate_policy = models.CharField(
        "numbers on several rows",
        max_length=8,
        choices=DuplicatePolicy.choices,
        default=DuplicatePolicy.LAST,
    )
    status = models.CharField(
        max_length=16, choices=ContactUploadStatus.choices, default=ContactUploadStatus.MAPPING
    )
    rows_read = models.PositiveIntegerField(default=0)
    # How far the second stage has gone (0-100) for a policy that reads the whole file before
    # it writes (first row wins, reject repeated numbers); None while the file is read.
    write_percent = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    # ContactImportResult.as_dict(), the listed rejections cut short.
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    rejects_name = models.CharField(max_length=100, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.original_name} into {self.contact_list_id}"


class PricingCategory(models.TextChoices):
    MARKETING = "marketing", "Marketing"
    UTILITY = "utility", "Utility"
    AUTHENTICATION = "authentication", "Authentication"
    SERVICE = "service", "Service"


class RateCard(models.Model):
    """What Meta charges per delivered message (per-message pricing) by country and category.

    ``country_prefix`` is the recipient's calling code with the plus ("+55"); the longest
    prefix wins; "*" is the fallback for countries not listed.
    """

    country_prefix = models.CharField(max_length=8, help_text='"+55", or "*" for any other')
    category = models.CharField(max_length=16, choices=PricingCategory.choices)
    price = models.DecimalField(max_digits=10, decimal_places=5, help_text="Per message")
    currency = models.CharField(max_length=3, default="USD")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("country_prefix", "category")
        constraints = [
            models.UniqueConstraint(
                fields=("country_prefix", "category"), name="rate_card_unique_rate"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.country_prefix} {self.category}: {self.price} {self.currency}"
