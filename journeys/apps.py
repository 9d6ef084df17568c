from django.apps import AppConfig


class JourneysConfig(AppConfig):
    name = "journeys"
    default_auto_field = "django.db.models.BigAutoField"
