"""What the process-driving benchmarks share: Django set up from the checkout, and the
environment their worker, web and simulator processes run with."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")
    import django

    django.setup()


def process_env(**overrides: str) -> dict[str, str]:
    """The benchmark's own database, Redis and secret, for the processes it starts."""
    from django.conf import settings

    from whatsblast.core.processes import service_environment

    return {
        **service_environment(),
        "DEBUG": "1",
        "LOG_LEVEL": "WARNING",
        "SECRET_KEY": settings.SECRET_KEY,
        **overrides,
    }
