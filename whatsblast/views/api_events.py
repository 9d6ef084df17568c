"""``/api/v1/`` event subscriptions and their dead letters: thin views over one service each."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
