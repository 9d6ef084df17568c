"""The production deployment as shipped in deploy/: settings, gunicorn, the Procfile."""

from __future__ import annotations

import json
import os
import runpy
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from django.core.management import get_commands
from gunicorn.config import Config

from whatsblast.core.processes import ProcessGroup, free_port, service_environment, wait_for_http

BASE_DIR = Path(__file__).resolve().parents[2]
DEPLOY = BASE_DIR / "deploy"


def production_env(**overrides: str) -> dict[str, str]:
    """deploy/production.env.example with its placeholders filled in."""
    env: dict[str, str] = {}
    for line in (DEPLOY / "production.env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    for name, value in env.items():
        if "__" in value:
            secret = secrets.token_urlsafe(48)
            env[name] = value.replace(value[value.index("__") : value.rindex("__") + 2], secret)
    return {**env, **overrides}


def run_manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in env and not k.startswith("DJANGO")}
    return subprocess.run(  # noqa: S603
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BASE_DIR,
    )


def test_check_deploy_is_clean_with_the_production_environment() -> None:
    done = run_manage(production_env(), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy_flags_a_development_environment() -> None:
    """The same command is not trivially clean: DEBUG and plain cookies are reported."""
    env = production_env(DEBUG="1", SESSION_COOKIE_SECURE="0", SECURE_HSTS_SECONDS="0")
    done = run_manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0
    for warning in ("security.W018", "security.W012", "security.W004"):
        assert warning in done.stderr + done.stdout


def test_the_procfile_runs_every_process_with_real_commands() -> None:
    processes = {}
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            processes[name] = command.strip()
    assert {
        "release",
        "web",
        "worker-transactional",
        "worker-campaigns",
        "worker-maintenance",
        "ticker",
    } <= set(processes)
    known = get_commands()
    queues_served = set()
    for name, command in processes.items():
        for part in command.split("&&"):
            argv = shlex.split(part)
            if "manage.py" in argv:
                sub = argv[argv.index("manage.py") + 1]
                assert sub in known, f"{name}: manage.py {sub} does not exist"
                if sub == "rqworker":
                    queues_served |= {
                        a for a in argv if a in ("transactional", "campaigns", "maintenance")
                    }
                    assert "--worker-ttl" in argv
    assert queues_served == {"transactional", "campaigns", "maintenance"}
    assert "--with-scheduler" in processes["worker-maintenance"]
    assert processes["web"].startswith("gunicorn -c deploy/gunicorn.conf.py")


def test_the_web_process_keeps_pythons_event_loop_and_http_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gunicorn's asgi worker takes uvloop and its C parser when it can import them
    ("auto"); measured, uvloop stored fewer webhook POSTs a second, and the C parser drops
    a kept-alive connection, so the deployed config names asyncio and the Python parser."""
    # The config sets PROMETHEUS_MULTIPROC_DIR for its master; read here, that would leak
    # into every process this test run starts afterwards (a directory that never exists).
    monkeypatch.setattr(os, "environ", dict(os.environ))
    settings_in_file = runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))
    config = Config()
    for name, value in settings_in_file.items():
        if name in config.settings:
            config.set(name, value)
    assert config.worker_class_str == "asgi"
    assert config.asgi_loop == "asyncio"
    # The Python parser keeps a large request that reached a kept-alive connection before the
    # worker was ready for it; the C one capped it at 64 KiB and dropped the connection
    # (tests/whatsblast/test_web_keep_alive.py).
    assert config.http_parser == "python"


@pytest.fixture
def gunicorn(tmp_path, settings) -> Iterator[tuple[str, Path]]:
    """The web process as deploy/ runs it: production settings, JSON logs, two workers."""
    static_root = tmp_path / "static"
    env = production_env(
        ALLOWED_HOSTS="127.0.0.1",
        **service_environment(),
        STATIC_ROOT=str(static_root),
        GUNICORN_WORKERS="2",
        GUNICORN_THREADS="2",
    )
    collect = run_manage(env, "collectstatic", "--noinput", "-v0")
    assert collect.returncode == 0, collect.stderr
    with web_process(tmp_path, env) as (url, log_path):
        yield url, log_path


@contextmanager
def web_process(
    tmp_path: Path, env: dict[str, str], app: str = "whatsblast.asgi"
) -> Iterator[tuple[str, Path]]:
    """gunicorn as deploy/gunicorn.conf.py runs it, with ``env``, on a free port."""
    bind = f"127.0.0.1:{free_port()}"
    # gunicorn.conf.py empties and creates the metrics directory before the workers start.
    group = ProcessGroup(
        tmp_path / "logs",
        {**env, "GUNICORN_BIND": bind, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus")},
    )
    web = group.start("web", ["-m", "gunicorn", "-c", str(DEPLOY / "gunicorn.conf.py"), app])
    try:
        wait_for_http(f"http://{bind}/healthz")
        yield f"http://{bind}", web.log_path
    finally:
        group.stop()


def healthz_requests(metrics: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("django_http_requests_total_by_view_transport_method_total{")
        and 'view="healthz"' in line
    )


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_behind_the_proxy_with_metrics_static_files_and_json_logs(
    gunicorn,
) -> None:
    url, log_path = gunicorn
    https = {"X-Forwarded-Proto": "https"}

    # Probes answer over plain HTTP from inside; everything else is sent to HTTPS.
    assert requests.get(f"{url}/healthz", timeout=5).json() == {"status": "ok"}
    plain = requests.get(f"{url}/admin/login/", timeout=5, allow_redirects=False)
    assert plain.status_code == 301 and plain.headers["Location"].startswith("https://")

    login = requests.get(f"{url}/admin/login/", headers=https, timeout=5)
    assert login.status_code == 200
    assert "max-age=31536000" in login.headers["Strict-Transport-Security"]
    assert "secure" in login.headers["Set-Cookie"].lower()
    css = requests.get(f"{url}/static/admin/css/base.css", headers=https, timeout=5)
    assert css.status_code == 200 and "text/css" in css.headers["Content-Type"]

    # Django's request counter sums both gunicorn workers (shared metrics files).
    before = healthz_requests(requests.get(f"{url}/metrics", timeout=5).text)
    for _ in range(20):
        requests.get(f"{url}/healthz?phone=+5511912341234", timeout=5)
    metrics = requests.get(f"{url}/metrics", timeout=5).text
    assert healthz_requests(metrics) - before == 20
    assert 'whatsblast_collector_up{source="postgres"} 1.0' in metrics
    assert 'whatsblast_collector_up{source="redis"} 1.0' in metrics

    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    access = [r for r in records if r["logger"] == "gunicorn.access"]
    assert any("/healthz" in r["message"] for r in access)
    assert "+5511912341234" not in log_path.read_text()
