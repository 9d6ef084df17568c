"""The RQ dashboard behind a permission, not just a staff flag.

django-rq's dashboard (queues, jobs, requeue and delete buttons) only asks for a staff
account, so a marketer or a support agent could empty a queue. Here it asks for the
``django_rq.admin`` permission, which only operators hold.
"""

from __future__ import annotations

from functools import wraps
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django_rq.admin import QueueAdmin
from django_rq.models import Dashboard

RQ_PERMISSION = "django_rq.admin"


class GuardedQueueAdmin(QueueAdmin):
    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(RQ_PERMISSION)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(RQ_PERMISSION)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(RQ_PERMISSION)

    def get_urls(self) -> list[Any]:
        urls: list[Any] = super().get_urls()  # type: ignore[no-untyped-call]
        for pattern in urls:
            callback = pattern.callback

            @wraps(callback)
            def guarded(
                request: HttpRequest, *args: Any, _view: Any = callback, **kwargs: Any
            ) -> Any:
                # Anonymous users fall through to the admin's login redirect; the
                # JSON/metrics views authenticate by their own token when one is given.
                user = request.user
                if (
                    user.is_authenticated
                    and "token" not in kwargs
                    and not user.has_perm(RQ_PERMISSION)
                ):
                    raise PermissionDenied
                return _view(request, *args, **kwargs)

            pattern.callback = guarded
        return urls


if admin.site.is_registered(Dashboard):
    admin.site.unregister(Dashboard)
admin.site.register(Dashboard, GuardedQueueAdmin)

admin.site.site_header = "whatsblast"
admin.site.site_title = "whatsblast"
admin.site.index_title = "Campaigns, contacts, delivery and support"
# There is no public site: "View site" would land on a 404, so the
# header shows no such link.
admin.site.site_url = None
