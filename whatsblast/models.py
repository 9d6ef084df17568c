"""The site's own table: each person's preferences for the admin.

The module is also why Django sends this app ``post_migrate`` (it skips apps without a
models module): ``whatsblast.apps`` keeps the roles current on it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Preferences(models.Model):
    """One person's own settings, set by them on "My preferences" (whatsblast.auth.time_zone)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="preferences",
    )
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        help_text="Times on every page are shown in this zone; blank: the site's default.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "preferences"

    def __str__(self) -> str:
        return f"preferences of {self.user_id}"
