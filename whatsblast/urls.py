"""URL map: the admin, Meta's webhook, the transactional API, metrics and health."""

from django.contrib import admin
from django.urls import include, path, re_path

from whatsblast.admin.customer import customer
from whatsblast.admin.preferences import preferences
from whatsblast.auth.login_throttle import ThrottledAdminLoginForm
from whatsblast.views import (
    api,
    api_campaigns,
    api_contacts,
    api_events,
    api_journeys,
    clicks,
    health,
    metrics,
    webhooks,
)

# Refuses, with a plain message, a username and address that failed too many logins.
admin.site.login_form = ThrottledAdminLoginForm

# Meta's callback URL, exactly as registered with Meta: no trailing slash.
webhook_urls = (
    [path("whatsapp", webhooks.whatsapp_webhook, name="whatsapp")],
    "webhooks",
)

# /api/v1/: anything else under the prefix answers a JSON 404, not an HTML page.
api_urls = (
    [
        path("messages", api.messages, name="messages"),
        path("messages/<int:message_id>", api.message, name="message"),
        path("conversions", api.conversions, name="conversions"),
        *api_contacts.urlpatterns,
        *api_campaigns.urlpatterns,
        *api_events.urlpatterns,
        *api_journeys.urlpatterns,
        path("openapi.json", api.openapi_json, name="openapi"),
        # Any character, newlines too: "." would leave "messages/1\n" to Django's HTML 404.
        re_path(r"^(?P<rest>[\s\S]*)\Z", api.not_found),
    ],
    "api",
)

# A refusal, styled like the admin, with a way back (templates/403.html).
handler403 = "whatsblast.views.errors.forbidden"

urlpatterns = [
    path("admin/preferences/", preferences, name="wb_preferences"),
    # One person's page: a phone (+5511987654321) or a WhatsApp user id.
    path("admin/customer/<str:key>/", customer, name="wb_customer"),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("webhooks/", include(webhook_urls)),
    path("api/v1/", include(api_urls)),
    path("metrics", metrics.metrics, name="metrics"),
    path("c/<str:token>", clicks.click, name="click"),
]
