"""The local settings file (./.env, or WHATSBLAST_ENV_FILE): what `make demo` writes so that
commands typed by hand run like the demo, without weakening production, which has none and
still refuses to start without its own SECRET_KEY."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from whatsblast.core.env import env_file_path, env_file_write_development

BASE_DIR = Path(__file__).resolve().parents[2]
SHOW = "from django.conf import settings; print(settings.DEBUG, settings.SECRET_KEY)"


def manage(env_file: Path | str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """manage.py as typed in a shell that sets neither DEBUG nor SECRET_KEY."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    return subprocess.run(  # noqa: S603 - the project's own manage.py
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        env={**clean, "WHATSBLAST_ENV_FILE": str(env_file), **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BASE_DIR,
    )


def test_without_a_file_or_a_key_the_settings_refuse_to_start(tmp_path: Path) -> None:
    done = manage(tmp_path / "absent.env", "check")
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr


def test_the_development_file_runs_commands_typed_by_hand(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    key = env_file_write_development(path)
    assert len(key) >= 50
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert env_file_write_development(path) == key  # kept, not replaced
    done = manage(path, "shell", "-c", SHOW)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == ["True", key]


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("DEBUG=1\n", encoding="utf-8")
    done = manage(path, "check", DEBUG="0")
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr
    done = manage(path, "shell", "-c", SHOW, SECRET_KEY="from-the-environment")
    assert done.stdout.splitlines()[-1].split() == ["True", "from-the-environment"]


def test_an_empty_name_reads_no_file(tmp_path: Path) -> None:
    assert env_file_path(tmp_path / ".env", environ={}) == tmp_path / ".env"
    assert env_file_path(tmp_path / ".env", environ={"WHATSBLAST_ENV_FILE": ""}) is None
    env_file_write_development(tmp_path / ".env")
    done = manage("", "check")
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr
