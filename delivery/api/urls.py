"""``/api/v1/`` routes. Anything else under the prefix answers a JSON 404, not an HTML page."""

from django.urls import path, re_path

from delivery.api import views

app_name = "api"

urlpatterns = [
    path("messages", views.messages, name="messages"),
    path("messages/<int:message_id>", views.message, name="message"),
    path("openapi.json", views.openapi_json, name="openapi"),
    re_path(r"^(?P<rest>.*)$", views.not_found),
]
