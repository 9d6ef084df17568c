"""The site's app: after every ``migrate``, the roles' groups and permissions are made current."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class WhatsblastConfig(AppConfig):
    name = "whatsblast"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_roles_sync, sender=self, dispatch_uid="whatsblast-roles-sync")


def _roles_sync(sender: AppConfig, using: str = "default", **_: Any) -> None:
    # Sent for this app last (it is last in INSTALLED_APPS), after Django's own handlers
    # created every app's model permissions.
    from whatsblast.auth.roles import roles_sync  # the site's code, loaded once apps are ready

    roles_sync()
