"""Login throttling against password guessing, per username and client address.

Every failed login (Django's ``user_login_failed`` signal, whatever the backend) counts
against the pair (username, address) in Redis. At ``LOGIN_THROTTLE_FAILURES`` failures
within ``LOGIN_THROTTLE_WINDOW_SECONDS`` the pair is refused for a full window: the
backend refuses before looking at the password, and the admin's login form says so and
for how long. A successful login clears the pair's count.

Counting per pair rather than per username keeps one guesser from locking everyone out of
an account from elsewhere; counting per pair rather than per address keeps a shared
office address usable by its other users. Behind a proxy REMOTE_ADDR is the proxy's
address, so the throttle then counts per username.

Without Redis the throttle **fails open**: logins are checked by password alone (Django's
PBKDF2 hashing already costs a guesser a few hundred milliseconds per try), a warning is
logged, and nobody is locked out of the admin they need to repair things. Failing closed
would turn a Redis outage into an outage of every login.
"""

from __future__ import annotations

import hashlib
import logging
import math
from typing import Any

import redis
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest

from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "wb:login-fail"


def _key(username: str, address: str) -> str:
    # Hashed: usernames (often e-mail addresses) are not kept in Redis in clear.
    digest = hashlib.sha256(f"{username.strip().lower()}\0{address}".encode()).hexdigest()
    return f"{KEY_PREFIX}:{digest[:32]}"


def client_address(request: HttpRequest | None) -> str:
    return str(request.META.get("REMOTE_ADDR", "")) if request is not None else ""


def login_failure_record(*, username: str, address: str) -> int:
    """Count one failure; return the pair's failures in the current window (0: not counted)."""
    key = _key(username, address)
    window = settings.LOGIN_THROTTLE_WINDOW_SECONDS
    try:
        pipe = get_redis().pipeline()
        pipe.incr(key)
        pipe.expire(key, window, nx=True)  # the window starts at the first failure
        count = int(pipe.execute()[0])
        if count == settings.LOGIN_THROTTLE_FAILURES:
            get_redis().expire(key, window)  # locked a full window from the last allowed try
    except redis.RedisError as exc:
        _unavailable(exc)
        return 0
    return count


def login_blocked_for(*, username: str, address: str) -> int:
    """Seconds the pair stays refused; 0 when it may try (or the throttle is unavailable)."""
    key = _key(username, address)
    try:
        pipe = get_redis().pipeline()
        pipe.get(key)
        pipe.ttl(key)
        count, ttl = pipe.execute()
    except redis.RedisError as exc:
        _unavailable(exc)
        return 0
    if count is None or int(count) < settings.LOGIN_THROTTLE_FAILURES:
        return 0
    return max(int(ttl), 1)


def login_failures_clear(*, username: str, address: str) -> None:
    try:
        get_redis().delete(_key(username, address))
    except redis.RedisError as exc:
        _unavailable(exc)


def _unavailable(exc: redis.RedisError) -> None:
    logger.warning("login throttle unavailable (%s): logins are checked by password only", exc)


def _on_login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any
) -> None:
    username = credentials.get("username")
    if username:
        login_failure_record(username=str(username), address=client_address(request))


def _on_logged_in(sender: Any, request: Any, user: Any, **_: Any) -> None:
    login_failures_clear(username=user.get_username(), address=client_address(request))


user_login_failed.connect(_on_login_failed, dispatch_uid="whatsblast-login-throttle-failed")
user_logged_in.connect(_on_logged_in, dispatch_uid="whatsblast-login-throttle-ok")


class ThrottledModelBackend(ModelBackend):
    """Django's model backend, refusing a throttled (username, address) outright.

    Settings name this class, so importing it also connects the signal receivers above
    before any login is attempted.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if username and login_blocked_for(username=username, address=client_address(request)):
            raise PermissionDenied("too many failed logins")
        return super().authenticate(request, username=username, password=password, **kwargs)


class ThrottledAdminLoginForm(AdminAuthenticationForm):
    """The admin login form, saying plainly when and for how long a login is refused."""

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username:
            wait = login_blocked_for(username=username, address=client_address(self.request))
            if wait:
                minutes = math.ceil(wait / 60)
                raise ValidationError(
                    "Too many failed logins for this username from your address. "
                    f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                    code="throttled",
                )
        return super().clean()
