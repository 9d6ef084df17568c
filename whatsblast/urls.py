"""URL map: the admin, Meta's webhook, the transactional API, metrics and health."""

from django.contrib import admin
from django.urls import include, path

from campaigns.login_throttle import ThrottledAdminLoginForm
from whatsblast import health
from whatsblast.observability import views as observability

# Refuses, with a plain message, a username and address that failed too many logins.
admin.site.login_form = ThrottledAdminLoginForm

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("webhooks/", include("webhooks.urls")),
    path("api/v1/", include("delivery.api.urls")),
    path("metrics", observability.metrics, name="metrics"),
]
