"""``/api/v1/`` campaigns: create, pre-flight, run, status, report and results (thin views)."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
