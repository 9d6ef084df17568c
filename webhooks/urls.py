"""Meta's callback URL, exactly as registered with Meta: no trailing slash."""

from django.urls import path

from webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("whatsapp", views.whatsapp_webhook, name="whatsapp"),
]
