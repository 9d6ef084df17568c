"""``/api/v1/`` contacts, lists, segments and templates: thin views over one service each."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
