"""The admin's roles: Django groups with exactly the permissions each job needs.

- **Marketing** uploads contacts and manages lists, segments and contacts, reads templates,
  numbers, messages and the rate card (prices are the operators' to change), creates,
  edits and launches campaigns, builds journeys and recurring campaigns and runs them (go
  live, pause, resume, archive), and reads who is in them and what happened to them.
- **Support** reads messages, campaigns, contacts, segments, journeys (and each person's
  way through them), webhook records and event subscriptions (with their dead letters),
  and decides dead letters (requeue, discard).
- **Operators** hold every permission of the project's apps: numbers, accounts, API keys,
  templates, the queue dashboard and all of the above. Users and groups stay with
  superusers.

``roles_sync`` makes the groups match this module: a migration runs it once, and
``manage.py roles sync`` runs it again after models (and so permissions) were added.
Permissions given to these groups by hand are taken away by the next sync; give extra
rights through another group.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

logger = logging.getLogger(__name__)

MARKETING = "Marketing"
SUPPORT = "Support"
OPERATORS = "Operators"

# Operators hold every permission of these apps (django_rq: the queue dashboard).
OPERATOR_APPS = ("campaigns", "delivery", "journeys", "webhooks", "django_rq")

# Permissions no model's Meta declares: (app label, model, codename, name).
CUSTOM_PERMISSIONS = (
    ("campaigns", "campaign", "launch_campaign", "Can launch campaigns"),
    ("campaigns", "phonenumber", "send_test_message", "Can send a test message from a number"),
)

VIEW, ADD, CHANGE, DELETE = "view", "add", "change", "delete"
ALL = "*"


def _model(label: str, *actions: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``_model("campaigns.contact", VIEW, ADD)`` → ``("campaigns.view_contact", ...)``."""
    app_label, model = label.split(".")
    return tuple(f"{app_label}.{a}_{model}" for a in actions) + tuple(
        f"{app_label}.{codename}" for codename in extra
    )


ROLE_PERMISSIONS: dict[str, tuple[str, ...] | str] = {
    MARKETING: (
        *_model("campaigns.contactlist", VIEW, ADD, CHANGE, DELETE),
        *_model("campaigns.contact", VIEW, ADD, CHANGE, DELETE),
        *_model("campaigns.segment", VIEW, ADD, CHANGE, DELETE),
        *_model("campaigns.contactupload", VIEW, ADD),
        *_model("campaigns.template", VIEW),
        *_model("campaigns.phonenumber", VIEW),
        *_model("campaigns.ratecard", VIEW),
        *_model("campaigns.campaign", VIEW, ADD, CHANGE, extra=("launch_campaign",)),
        *_model("delivery.message", VIEW),
        # Reads conversions and uploads them (the CSV page; the list itself is read-only).
        *_model("delivery.conversion", VIEW, ADD),
        # Builds journeys and recurring campaigns and runs them; reads who is in them.
        *_model("journeys.journey", VIEW, ADD, CHANGE, extra=("run_journey",)),
        *_model("journeys.journeyinstance", VIEW),
        *_model("journeys.journeyhistory", VIEW),
        *_model("journeys.journeyrun", VIEW),
    ),
    SUPPORT: (
        *_model("delivery.message", VIEW),
        *_model("delivery.conversion", VIEW),
        *_model("delivery.deadletter", VIEW, extra=("requeue_deadletter", "discard_deadletter")),
        *_model("campaigns.campaign", VIEW),
        *_model("campaigns.contact", VIEW),
        *_model("campaigns.contactlist", VIEW),
        *_model("campaigns.segment", VIEW),
        *_model("campaigns.phonenumber", VIEW),
        *_model("webhooks.webhookevent", VIEW),
        *_model("webhooks.unmatchedstatus", VIEW),
        *_model("webhooks.inboundmessage", VIEW),
        *_model("webhooks.asyncerror", VIEW),
        # Reads event subscriptions and their dead letters; pause, resume, replay: Operators.
        *_model("delivery.eventsubscription", VIEW),
        # Reads journeys and each person's way through them (the customer page).
        *_model("journeys.journey", VIEW),
        *_model("journeys.journeyinstance", VIEW),
        *_model("journeys.journeyhistory", VIEW),
    ),
    OPERATORS: ALL,
}


@dataclass
class RolesReport:
    permissions: dict[str, int] = field(default_factory=dict)
    # Named above but absent from the database (a model not migrated yet).
    missing: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"groups": self.permissions, "missing": self.missing}


def roles_sync(*, registry: Apps = global_apps) -> RolesReport:
    """Create the custom permissions and the groups; set each group's permissions exactly.

    ``registry`` is a migration's historical apps when run from one. Idempotent.
    """
    group_model = registry.get_model("auth", "Group")
    permission_model = registry.get_model("auth", "Permission")
    content_type_model = registry.get_model("contenttypes", "ContentType")
    report = RolesReport()
    with transaction.atomic():
        for app_label, model, codename, name in CUSTOM_PERMISSIONS:
            try:
                registry.get_model(app_label, model)
            except LookupError:
                continue
            content_type, _ = content_type_model.objects.get_or_create(
                app_label=app_label, model=model
            )
            permission_model.objects.get_or_create(
                content_type=content_type, codename=codename, defaults={"name": name}
            )
        for group_name, wanted in ROLE_PERMISSIONS.items():
            group, _ = group_model.objects.get_or_create(name=group_name)
            permissions: list[Any]
            if isinstance(wanted, str):  # ALL
                permissions = list(
                    permission_model.objects.filter(content_type__app_label__in=OPERATOR_APPS)
                )
            else:
                permissions = _permissions_named(permission_model, wanted)
                found = {f"{p.content_type.app_label}.{p.codename}" for p in permissions}
                missing = sorted(set(wanted) - found)
                if missing:
                    report.missing[group_name] = missing
                    logger.warning("role %s: no permission %s yet", group_name, missing)
            group.permissions.set(permissions)
            report.permissions[group_name] = len(permissions)
    return report


def _permissions_named(permission_model: Any, names: tuple[str, ...]) -> list[Any]:
    match = Q()
    for name in names:
        app_label, codename = name.split(".")
        match |= Q(content_type__app_label=app_label, codename=codename)
    return list(permission_model.objects.filter(match).select_related("content_type"))


def role_grant(*, username: str, role: str) -> None:
    """Put a user in a role's group; members of a role are staff (they use the admin)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    if role not in ROLE_PERMISSIONS:
        raise ValidationError(f"unknown role {role!r}: use one of {', '.join(ROLE_PERMISSIONS)}")
    user_model = get_user_model()
    try:
        user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
    except user_model.DoesNotExist:
        raise ValidationError(f"no user {username!r}") from None
    group = Group.objects.filter(name=role).first()
    if group is None:
        raise ValidationError(f"no group {role!r} yet: run `manage.py roles sync` first")
    with transaction.atomic():
        user.groups.add(group)
        if not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
