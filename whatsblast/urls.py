"""URL map: the admin, Meta's webhook, the transactional API, metrics and health."""

from django.contrib import admin
from django.urls import include, path

from whatsblast import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("webhooks/", include("webhooks.urls")),
    path("api/v1/", include("delivery.api.urls")),
    path("", include("django_prometheus.urls")),
]
