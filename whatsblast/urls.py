"""URL map: the admin, Meta's webhook, the transactional API, metrics and health."""

from django.contrib import admin
from django.urls import include, path

from whatsblast import health
from whatsblast.observability import views as observability

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("webhooks/", include("webhooks.urls")),
    path("api/v1/", include("delivery.api.urls")),
    path("metrics", observability.metrics, name="metrics"),
]
