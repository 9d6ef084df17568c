"""The one settings module. Every value comes from the environment (see .env.example)."""

from __future__ import annotations

from pathlib import Path

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured

from whatsblast.core import embedded
from whatsblast.core.env import (
    env_bool,
    env_file_load,
    env_file_path,
    env_float,
    env_int,
    env_list,
    env_optional,
    env_str,
    env_url,
)
from whatsblast.core.frequency import frequency_cap_parse
from whatsblast.core.logging import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

# Generic admin and form classes (ModelAdmin[Campaign]) subscriptable at run time, as the
# type checker sees them.
django_stubs_ext.monkeypatch()

# ./.env (or WHATSBLAST_ENV_FILE) fills in what the environment leaves unset: `make demo`
# writes one with DEBUG on and its own SECRET_KEY, so that a command typed by hand next to
# the demo runs as the demo does. Production has no such file and sets its environment.
ENV_FILE = env_file_path(BASE_DIR / ".env")
env_file_load(ENV_FILE)

DEBUG = env_bool("DEBUG", False)
# A development key is allowed only with DEBUG on; production must set its own.
SECRET_KEY = env_str("SECRET_KEY", "dev-insecure-secret-key-change-me" if DEBUG else None)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

DATA_DIR = Path(env_str("WHATSBLAST_DATA_DIR", str(BASE_DIR / ".whatsblast")))

# --- services: given URLs, or the embedded ones -------------------------------------------
DATABASE_URL = env_url("DATABASE_URL", schemes=("postgres", "postgresql")) or (
    embedded.postgres_url(DATA_DIR)
)
REDIS_URL = env_url("REDIS_URL", schemes=("redis", "rediss", "unix")) or embedded.redis_url(
    DATA_DIR
)

_db = environ.Env.db_url_config(DATABASE_URL)
_db["ENGINE"] = "django_prometheus.db.backends.postgresql"
# Persistent connections: a new connection per request costs ~7x the webhook throughput.
_db["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 60, minimum=0)
_db["CONN_HEALTH_CHECKS"] = True
# A worker cut off from PostgreSQL (a partition: packets dropped, nothing refused) must find
# out and let another host take its work, not wait ~15 min for the kernel to give up on a
# query (docs/operations.md, "Network timeouts"). libpq applies these to TCP only: a
# connection over a Unix socket ignores them. tcp_user_timeout bounds how long sent data
# may stay unacknowledged, so a long query the server is still working on is not cut.
DB_CONNECT_TIMEOUT = env_int("DB_CONNECT_TIMEOUT", 5, minimum=1)
DB_TCP_USER_TIMEOUT_MS = env_int("DB_TCP_USER_TIMEOUT_MS", 15_000, minimum=0)
DB_KEEPALIVES_IDLE = env_int("DB_KEEPALIVES_IDLE", 10, minimum=1)
_db["OPTIONS"] = {
    "connect_timeout": DB_CONNECT_TIMEOUT,
    "keepalives": 1,
    "keepalives_idle": DB_KEEPALIVES_IDLE,
    "keepalives_interval": max(1, DB_KEEPALIVES_IDLE // 2),
    "keepalives_count": 3,
    "tcp_user_timeout": DB_TCP_USER_TIMEOUT_MS,
    **(_db.get("OPTIONS") or {}),  # what DATABASE_URL's query says wins
}
DATABASES = {"default": _db}
# The same for Redis (whatsblast.core.redis): every command answers within
# REDIS_SOCKET_TIMEOUT or fails, and idle TCP connections are probed (keepalive).
REDIS_CONNECT_TIMEOUT = env_float("REDIS_CONNECT_TIMEOUT", 5.0, minimum=0.1, maximum=60)
REDIS_SOCKET_TIMEOUT = env_float("REDIS_SOCKET_TIMEOUT", 10.0, minimum=0.1, maximum=300)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cloud API -------------------------------------------------------------------------------
WHATSAPP_API_BASE_URL = env_url(
    "WHATSAPP_API_BASE_URL", "https://graph.facebook.com", schemes=("http", "https")
)
# Graph API version. Supported: v23.0, v24.0, v25.0 (tests read the number at v23 and at
# v24+). v25.0 is the newest whose fields were checked against Meta's pages: "Messaging
# limits" (Updated 2026-05-08) reads whatsapp_business_manager_messaging_limit at v25.0,
# and the send and template pages use v25.0 in their examples (shared/cloud-api.md §1.4).
# Expiry (Graph API changelog, versions table): v23.0 2027-10-08, v24.0 2028-02-18,
# v25.0 2028-07-29. v26.0 (released 2026-07-29) is not verified yet.
WHATSAPP_API_VERSION = env_str("WHATSAPP_API_VERSION", "v25.0")
WHATSAPP_APP_SECRET = env_optional("WHATSAPP_APP_SECRET")
WHATSAPP_VERIFY_TOKEN = env_optional("WHATSAPP_VERIFY_TOKEN")
WHATSAPP_CONNECT_TIMEOUT = env_float("WHATSAPP_CONNECT_TIMEOUT", 3.05, minimum=0.1, maximum=60)
WHATSAPP_READ_TIMEOUT = env_float("WHATSAPP_READ_TIMEOUT", 10.0, minimum=0.1, maximum=300)
# The campaign hot path's HTTP client: "aiohttp" (about a third of the CPU per send, see
# delivery/async_transport.py) or "requests" (threads around the blocking client).
WHATSAPP_HTTP_CLIENT = env_str("WHATSAPP_HTTP_CLIENT", "aiohttp")
if WHATSAPP_HTTP_CLIENT not in ("aiohttp", "requests"):
    raise ImproperlyConfigured("WHATSAPP_HTTP_CLIENT must be 'aiohttp' or 'requests'")

# --- engine ----------------------------------------------------------------------------------
# At most N marketing templates per contact in any rolling window, across campaigns ("2/7d";
# empty: no cap); a campaign may override it. Enforced as rows are claimed
# (delivery.engine.frequency_cap).
MARKETING_FREQUENCY_CAP = env_str("MARKETING_FREQUENCY_CAP", "")
try:
    frequency_cap_parse(MARKETING_FREQUENCY_CAP)
except ValueError as _exc:
    raise ImproperlyConfigured(f"MARKETING_FREQUENCY_CAP: {_exc}") from _exc
# How long a claimed row may stay in `sending` before the reconciler treats it as ambiguous.
SEND_LEASE_SECONDS = env_int("SEND_LEASE_SECONDS", 120, minimum=5)
# How long an `unknown` row waits for webhook evidence before the campaign's policy applies.
UNKNOWN_SETTLE_SECONDS = env_int("UNKNOWN_SETTLE_SECONDS", 600, minimum=1)
# Campaign share one sender chain is expected to carry (see delivery.engine.dispatch.slots_for).
CAMPAIGN_SLOT_RATE = env_float("CAMPAIGN_SLOT_RATE", 500.0, minimum=1)
# When set, each worker writes the moment of every campaign send's grant to a file here
# (delivery.engine.send_trace): what the engine paced, apart from when Meta counted it.
SEND_TRACE_DIR = env_str("WHATSBLAST_SEND_TRACE_DIR", "")
# The template catalogue is synced from Meta at most this often (0: never on its own).
TEMPLATE_SYNC_INTERVAL_SECONDS = env_int("TEMPLATE_SYNC_INTERVAL_SECONDS", 900, minimum=0)
# How often the quality guard judges the running campaigns (0: at every tick).
GUARD_INTERVAL_SECONDS = env_float("GUARD_INTERVAL_SECONDS", 5.0, minimum=0.0)
# How often every number and account is read from the Graph API (0: never).
GRAPH_READ_INTERVAL_SECONDS = env_int("GRAPH_READ_INTERVAL_SECONDS", 3600, minimum=0)
# How long one campaign job sends before handing over to its continuation.
CAMPAIGN_JOB_BUDGET_SECONDS = env_float("CAMPAIGN_JOB_BUDGET_SECONDS", 20.0, minimum=0.5)
WEBHOOK_MAX_BODY_BYTES = env_int("WEBHOOK_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1024)
# Applied, rejected and failed callbacks are deleted this long after they arrived
# (webhooks/retention.py); 0 keeps every one. 336 h = 14 days, past Meta's 7-day redelivery.
WEBHOOK_EVENT_RETENTION_HOURS = env_float("WEBHOOK_EVENT_RETENTION_HOURS", 336.0, minimum=0.0)
# Webhook ingest (webhooks/ingest.py): concurrent POSTs of a web process stored by one
# INSERT each round; at most WEBHOOK_MAX_PENDING wait per process (the admission limit),
# each at most WEBHOOK_STORE_TIMEOUT_S, else 503 with Retry-After: WEBHOOK_RETRY_AFTER_S.
WEBHOOK_GROUP_COMMIT = env_bool("WEBHOOK_GROUP_COMMIT", True)
# On the asgi web process the POSTs past it answer 503 at once while the database is slow;
# on the threaded alternative keep it below the thread count (GUNICORN_THREADS).
WEBHOOK_MAX_PENDING = env_int("WEBHOOK_MAX_PENDING", 500, minimum=1)
WEBHOOK_STORE_TIMEOUT_S = env_float("WEBHOOK_STORE_TIMEOUT_S", 5.0, minimum=0.1, maximum=60)
WEBHOOK_RETRY_AFTER_S = env_int("WEBHOOK_RETRY_AFTER_S", 1, minimum=1)
# A POST that waited longer than this before its handler ran (the process is past capacity:
# CPU, not the database) is answered 503 at once instead of late: on the asgi web process the
# event loop's lag (whatsblast/core/loop_lag.py), on the threaded one the wait for a thread
# (whatsblast/core/request_queue.py).
WEBHOOK_QUEUE_LIMIT_S = env_float("WEBHOOK_QUEUE_LIMIT_S", 1.0, minimum=0.01, maximum=30)
# Threads per web process for everything but webhook POSTs (admin, API, metrics, probes): the
# ASGI web process (whatsblast/asgi.py) runs Django's WSGI application on this many.
WEB_THREADS = env_int("GUNICORN_THREADS", 16, minimum=1, maximum=256)
# Committer threads per web process, each with its own connection (one inserts while
# another waits for its commit to reach the disk).
WEBHOOK_COMMITTERS = env_int("WEBHOOK_COMMITTERS", 2, minimum=1, maximum=8)

# --- webhooks: the applier (webhooks/applier.py) ----------------------------------------------
# Stored events taken per transaction; Meta batches up to 1,000 statuses in one event.
WEBHOOK_APPLY_BATCH_EVENTS = env_int("WEBHOOK_APPLY_BATCH_EVENTS", 200, minimum=1, maximum=10_000)
# ... and bodies read per transaction (at least one event, whatever its size).
WEBHOOK_APPLY_BATCH_BYTES = env_int("WEBHOOK_APPLY_BATCH_BYTES", 2 * 1024 * 1024, minimum=1)
# At most one applier job is enqueued per this interval, however fast the POSTs come.
WEBHOOK_APPLY_DEBOUNCE_MS = env_int("WEBHOOK_APPLY_DEBOUNCE_MS", 1000, minimum=10)
# One applier job drains events for at most this long, then hands over to a fresh job.
WEBHOOK_APPLY_BUDGET_SECONDS = env_int("WEBHOOK_APPLY_BUDGET_SECONDS", 60, minimum=1)
# Batches one drain applies at once, each on its own connection.
WEBHOOK_APPLY_THREADS = env_int("WEBHOOK_APPLY_THREADS", 2, minimum=1, maximum=8)
# A status matching no message yet is retried this long, then reported.
WEBHOOK_UNMATCHED_RETRY_SECONDS = env_int("WEBHOOK_UNMATCHED_RETRY_SECONDS", 3600, minimum=1)
# Inbound messages whose whole text (trimmed, any case or accents) is one of these opt out.
OPT_OUT_KEYWORDS = env_list(
    "OPT_OUT_KEYWORDS",
    [
        "STOP",
        "STOPP",
        "PARAR",
        "SAIR",
        "ARRÊTER",
        "BAJA",
        "UNSUBSCRIBE",
        "STOP PROMOTIONS",
        "STOP PROMO",
    ],
)
# --- end webhooks ----------------------------------------------------------------------------

# --- transactional API (delivery/api) --------------------------------------------------------
# Largest request body accepted; a template send with every parameter is a few KiB.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 64 * 1024, minimum=1024, maximum=1024 * 1024)
# Largest POST /api/v1/contacts body: 10,000 contacts with a few attributes each are
# 1-3 MiB of JSON.
API_CONTACTS_MAX_BODY_BYTES = env_int(
    "API_CONTACTS_MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024, maximum=64 * 1024 * 1024
)
# Requests per second one API key may make unless the key sets its own quota.
API_DEFAULT_REQUESTS_PER_SECOND = env_int("API_DEFAULT_REQUESTS_PER_SECOND", 50, minimum=1)

# --- end transactional API -------------------------------------------------------------------

# --- events out (delivery/events) ------------------------------------------------------------
# Batches of up to EVENTS_BATCH_SIZE events per POST, each
# POST given EVENTS_TIMEOUT_S; a failing subscription is retried with exponential backoff
# (EVENTS_BACKOFF_BASE_S doubling to EVENTS_BACKOFF_MAX_S, full jitter), paused after
# failing for EVENTS_PAUSE_AFTER_S (0: never), and an event it has not taken within
# EVENTS_RETRY_FOR_S of happening is dead-lettered. Delivered events are kept
# EVENTS_RETAIN_DAYS for replays.
EVENTS_BATCH_SIZE = env_int("EVENTS_BATCH_SIZE", 500, minimum=1, maximum=10_000)
EVENTS_TIMEOUT_S = env_float("EVENTS_TIMEOUT_S", 10.0, minimum=0.1)
EVENTS_BACKOFF_BASE_S = env_float("EVENTS_BACKOFF_BASE_S", 1.0, minimum=0.01)
EVENTS_BACKOFF_MAX_S = env_float("EVENTS_BACKOFF_MAX_S", 600.0, minimum=0.01)
EVENTS_PAUSE_AFTER_S = env_float("EVENTS_PAUSE_AFTER_S", 3600.0, minimum=0)
EVENTS_RETRY_FOR_S = env_float("EVENTS_RETRY_FOR_S", 86400.0, minimum=1)
EVENTS_RETAIN_DAYS = env_int("EVENTS_RETAIN_DAYS", 7, minimum=1)
# Receivers on loopback, private, link-local or reserved addresses are refused (at save and
# at connect: delivery/events/destinations.py) unless this is on; on by default with DEBUG.
EVENTS_ALLOW_PRIVATE_URLS = env_bool("EVENTS_ALLOW_PRIVATE_URLS", DEBUG)
# --- end events out --------------------------------------------------------------------------

# --- engagement: tracked links, conversions (delivery/engagement) ----------------------------
# Tracked links: the public base URL whatsblast answers clicks at (its /c/ path behind
# this host), e.g. https://go.example.com/c. A URL button approved as CLICK_BASE_URL/{{1}}
# gets each recipient's token as its suffix. Empty: no tracked links.
CLICK_BASE_URL = env_str("CLICK_BASE_URL", "").rstrip("/")
# Where an unknown, forged or expired token goes (never an error page).
CLICK_FALLBACK_URL = env_str("CLICK_FALLBACK_URL", "https://www.whatsapp.com/")
# How long after its message was created a token still redirects to its destination.
CLICK_TOKEN_DAYS = env_int("CLICK_TOKEN_DAYS", 90, minimum=1, maximum=3650)
# Click store (delivery/engagement/clicks.py): each click is committed before its redirect,
# concurrent clicks of a web process by one statement. At most CLICK_MAX_PENDING clicks wait
# per process (past it: 503 at once), each at most CLICK_STORE_TIMEOUT_S, else 503 with
# Retry-After: CLICK_RETRY_AFTER_S ("try again": the destination is read with the click).
CLICK_MAX_PENDING = env_int("CLICK_MAX_PENDING", 2000, minimum=1)
CLICK_STORE_TIMEOUT_S = env_float("CLICK_STORE_TIMEOUT_S", 3.0, minimum=0.1, maximum=60)
CLICK_RETRY_AFTER_S = env_int("CLICK_RETRY_AFTER_S", 2, minimum=1)
# Committer threads per web process, each with its own connection (as WEBHOOK_COMMITTERS).
CLICK_COMMITTERS = env_int("CLICK_COMMITTERS", 2, minimum=1, maximum=8)
# The committers prepare their statement once per connection (planning it cost PostgreSQL
# more than running it for a small batch). Turn off behind a pooler in transaction mode that
# does not keep prepared statements: PgBouncer before 1.21, or 1.21-1.23 without
# max_prepared_statements (on by default since 1.24).
CLICK_PREPARED_STATEMENTS = env_bool("CLICK_PREPARED_STATEMENTS", True)
# Conversions in one API request or upload batch.
CONVERSIONS_MAX_BATCH = env_int("CONVERSIONS_MAX_BATCH", 1000, minimum=1, maximum=10_000)
# Largest POST /api/v1/conversions body: a full batch of 1,000 is ~150-250 KiB of JSON.
CONVERSIONS_MAX_BODY_BYTES = env_int(
    "CONVERSIONS_MAX_BODY_BYTES", 1024 * 1024, minimum=1024, maximum=16 * 1024 * 1024
)
# --- end engagement --------------------------------------------------------------------------

# --- journeys: events in, the sweep (journeys/) ------------------------------------------------
# Events in one POST /api/v1/events request (Meta-free: what other systems say contacts did).
EVENTS_IN_MAX_BATCH = env_int("EVENTS_IN_MAX_BATCH", 1000, minimum=1, maximum=10_000)
# Largest POST /api/v1/events body: 1,000 events with a cart of a few items each are
# 0.3-1 MiB of JSON; each event's properties are at most 8 KiB.
EVENTS_IN_MAX_BODY_BYTES = env_int(
    "EVENTS_IN_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1024, maximum=64 * 1024 * 1024
)
# How long the tick's journeys pass (route events, fire due steps, check entries) may run
# before it leaves the rest to its own job (journeys/passes.py).
JOURNEYS_TICK_BUDGET_SECONDS = env_float("JOURNEYS_TICK_BUDGET_SECONDS", 1.0, minimum=0.05)
# How far ahead of its number a journey's sends may be made: seconds of the number's
# campaign rate in due, unsent messages, past which its due steps wait (journeys/sweep.py).
# 0 sweeps everything due at once.
JOURNEYS_SEND_AHEAD_SECONDS = env_float(
    "JOURNEYS_SEND_AHEAD_SECONDS", 30.0, minimum=0.0, maximum=3600.0
)
# --- end journeys ----------------------------------------------------------------------------

# --- admin UI: contact uploads, login throttling (campaigns/upload.py, login_throttle.py) ---
# Uploaded contact files are written here as they stream in, then imported by a worker on
# the maintenance queue: web and maintenance workers must share this directory.
CONTACT_UPLOAD_DIR = Path(env_str("CONTACT_UPLOAD_DIR", str(DATA_DIR / "uploads")))
# A million rows of a few columns is 30-60 MB of CSV; larger uploads are refused unread.
CONTACT_UPLOAD_MAX_BYTES = env_int("CONTACT_UPLOAD_MAX_BYTES", 256 * 1024 * 1024, minimum=1024)
# Rows per COPY and file lines per upsert of an upload's import (campaigns/audience/importing.py).
CONTACT_IMPORT_BATCH_SIZE = env_int("CONTACT_IMPORT_BATCH_SIZE", 20_000, minimum=1)
# Failed logins per username and client address before that pair is refused for the window.
LOGIN_THROTTLE_FAILURES = env_int("LOGIN_THROTTLE_FAILURES", 5, minimum=1)
LOGIN_THROTTLE_WINDOW_SECONDS = env_int("LOGIN_THROTTLE_WINDOW_SECONDS", 900, minimum=1)
AUTHENTICATION_BACKENDS = ["whatsblast.auth.login_throttle.ThrottledModelBackend"]
# --- end admin UI ----------------------------------------------------------------------------

# --- Django ----------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    "django_prometheus",
    "campaigns",
    "delivery",
    "journeys",
    "webhooks",
    "whatsblast",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "whatsblast.auth.time_zone.ViewerTimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "whatsblast.urls"
WSGI_APPLICATION = "whatsblast.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# The zone times are shown in for a person who has not chosen one under "My preferences"
# (whatsblast/auth/time_zone.py); an IANA name such as America/Sao_Paulo.
DISPLAY_TIME_ZONE = env_str("DISPLAY_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
# Dates and times written one way on every page (whatsblast/formats/en/formats.py).
FORMAT_MODULE_PATH = ["whatsblast.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(DATA_DIR / "staticfiles")))

LOGIN_URL = "admin:login"

# --- RQ --------------------------------------------------------------------------------------
# Served in this order by every worker: transactional traffic first.
RQ_QUEUE_NAMES = ("transactional", "campaigns", "maintenance")
_RQ_TIMEOUTS = {"transactional": 60, "campaigns": 600, "maintenance": 1800}
RQ_QUEUES = {
    name: {
        "URL": REDIS_URL,
        "DEFAULT_TIMEOUT": timeout,
        "SERIALIZER": "rq.serializers.JSONSerializer",
    }
    for name, timeout in _RQ_TIMEOUTS.items()
}
RQ = {"COMMIT_MODE": "on_db_commit", "WORKER_CLASS": "whatsblast.rq.Worker"}
# How long a finished job's return value stays in Redis. Nothing reads it but an operator
# looking at the queues; RQ keeps each in a stream of its own (some 5 KB with the job's
# hash), and at RQ's default of 500 s the soak's 28 jobs a second held 74 MB of them.
RQ_RESULT_TTL_SECONDS = env_int("RQ_RESULT_TTL_SECONDS", 60, minimum=0)

# --- operations: logs, readiness, production security (docs/operations.md) -----------------
# text, or json: one object per line. Phone numbers masked, secrets redacted either way.
LOG_FORMAT = env_str("LOG_FORMAT", "text")
LOGGING = logging_config(log_format=LOG_FORMAT, level=env_str("LOG_LEVEL", "INFO"))
# /readyz: a worker counts as alive when its last heartbeat is at most this old. RQ's idle
# heartbeat comes every worker TTL - 15 s (default TTL 420 s; deploy/ runs --worker-ttl 60).
READYZ_WORKER_MAX_AGE_SECONDS = env_int("READYZ_WORKER_MAX_AGE_SECONDS", 480, minimum=5)
# /readyz: the oldest stored webhook event not yet applied may be at most this old.
READYZ_WEBHOOK_LAG_SECONDS = env_int("READYZ_WEBHOOK_LAG_SECONDS", 300, minimum=1)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (deploy/nginx/whatsblast.conf).
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Probes and scrapes come over plain HTTP from inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Static files (the admin's) served by the web process itself after `collectstatic`.
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
    "whitenoise.middleware.WhiteNoiseMiddleware",
)
# Development serves straight from the apps' static dirs, no collectstatic needed.
WHITENOISE_AUTOREFRESH = WHITENOISE_USE_FINDERS = DEBUG
# --- end operations ------------------------------------------------------------------------
