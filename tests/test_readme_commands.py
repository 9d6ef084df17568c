"""Every command the README shows, run as written next to a running demo environment.

The README is read at test time: each line of its fenced shell blocks that starts with
``manage.py`` or ``make`` is a command, so a command added to the README later is run here
too. ``make demo`` and ``make test`` are not run here: CI (``.ci/run``) runs both, each the
whole job (the second runs this suite, which would then run itself).

The environment is the demo's: the simulator, the web server, a worker and the ticker run
on the test database and Redis with DEBUG on and the SECRET_KEY of the local settings file
the demo writes (``./.env``, here a copy under the test's directory). The commands are run
the way a person types them in another shell: neither DEBUG nor SECRET_KEY set, so they
find both in that file. Each must exit 0 without a traceback. Commands that serve until
stopped (a worker, the ticker, the events worker, the simulator) must come up, stay up and
stop cleanly on SIGTERM.

How a README line becomes commands (``expand``):

* ``[--option VALUE]``: the brackets are dropped and the option given; ``...`` ("more of
  the same") is dropped;
* ``a|b|c``: one run per alternative, in the README's order (``campaign
  start|pause|resume|cancel ID`` is four commands);
* the placeholders are replaced as ``PLACEHOLDERS`` documents below (an option's own
  placeholder in ``BY_OPTION`` first); an upper-case word or a ``<…>`` that is neither
  fails the test, naming it, so a new placeholder gets its substitution here;
* a trailing ``# comment`` is not part of the command.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from whatsblast.core.env import env_file_write_development
from whatsblast.core.processes import (
    ProcessGroup,
    free_port,
    service_environment,
    wait_for_http,
)

pytestmark = pytest.mark.django_db(transaction=True)

BASE_DIR = Path(__file__).resolve().parents[1]
README = BASE_DIR / "README.md"
SHELL_BLOCKS = frozenset({"", "bash", "sh", "shell", "console"})
COMMAND_START = re.compile(
    r"^(?:\$\s+)?(?:\.venv/bin/python\s+|python3?\s+|\./)?(manage\.py|make)\s"
)
# Run by CI, each as its own job (see the module's docstring).
RUN_BY_CI = frozenset({("make", "demo"), ("make", "test")})
# Commands that serve until stopped.
SERVERS = frozenset({"rqworker", "ticker", "events", "simulator", "runserver"})
# Upper-case words the README uses as values, not placeholders.
LITERALS = frozenset({"MARKETING", "UTILITY", "AUTHENTICATION", "BR", "US"})
SERVER_UP_S = 4.0
# Those that stop cleanly on SIGTERM once their handler is in (before, the signal kills
# them): on a loaded machine their start-up can outlast SERVER_UP_S.
CATCH_SIGTERM = frozenset({"rqworker", "ticker", "events"})
STARTUP_LIMIT_S = 60.0
CONTACTS = 3_000

NUMBER_ID = "100000000000777"
NUMBER_TOKEN = "readme-token"  # noqa: S105 - the simulator's token, not a real one
NAME = "readme_promo"


@dataclass
class Demo:
    """The running environment and the values the README's placeholders stand for."""

    env: dict[str, str]  # a shell's environment: no DEBUG, no SECRET_KEY
    simulator_url: str
    contacts: Path
    rejects: Path
    campaign_id: str = ""

    def placeholders(self) -> dict[str, str]:
        """Each placeholder of the README and what it becomes here."""
        return {
            # the number the running simulator knows
            "PNID": NUMBER_ID,
            "<phone number id>": NUMBER_ID,
            "TOKEN": NUMBER_TOKEN,
            "<access token>": NUMBER_TOKEN,
            "WABA_ID": "readme-waba",
            "<waba id>": "readme-waba",
            "URL": self.simulator_url,  # --api-base-url: the running simulator
            # the template's and the list's names
            "NAME": NAME,
            "<template name>": NAME,
            "<list name>": NAME,
            "N": "README campaign",
            "<campaign name>": "README campaign",
            # the contacts file imported, and where its rejected rows go
            "FILE": str(self.contacts),
            "<file>": str(self.contacts),
            "<rejects file>": str(self.rejects),
            # the id `campaign create` printed
            "ID": self.campaign_id,
            "<campaign id>": self.campaign_id,
        }

    def by_option(self) -> dict[tuple[str, str], str]:
        """An option's own placeholder, before ``placeholders``."""
        return {
            ("--rejects", "FILE"): str(self.rejects),  # not the file being imported
        }


def readme_commands(text: str) -> list[list[str]]:
    """The words of each ``manage.py`` and ``make`` line of the fenced shell blocks,
    a trailing ``# comment`` cut off."""
    commands: list[list[str]] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped[3:].strip().lower()
            continue
        if fence is None or fence not in SHELL_BLOCKS:
            continue
        match = COMMAND_START.match(stripped)
        if match:
            lexer = shlex.shlex(stripped[match.start(1) :], posix=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            commands.append(list(lexer))
    return commands


def expand(
    words: list[str], placeholders: dict[str, str], by_option: dict[tuple[str, str], str]
) -> list[list[str]]:
    """One README command → the argv of each run (brackets, alternatives, placeholders)."""
    words = [w for w in _placeholders_joined(words) if w.strip("[]") not in ("", "...")]
    words = [w.strip("[]") for w in words]
    choices: list[list[str]] = []
    for index, word in enumerate(words):
        previous = words[index - 1] if index else ""
        alternatives = word.split("|") if "|" in word and not word.startswith("-") else [word]
        choices.append([_substitute(w, previous, placeholders, by_option) for w in alternatives])
    return [list(argv) for argv in itertools.product(*choices)]


def _placeholders_joined(words: list[str]) -> list[str]:
    """``<phone``, ``number``, ``id>`` → ``<phone number id>``: one placeholder."""
    joined: list[str] = []
    open_placeholder = False
    for word in words:
        if open_placeholder:
            joined[-1] += f" {word}"
        else:
            joined.append(word)
        if word.lstrip("[").startswith("<"):
            open_placeholder = True
        if word.rstrip("]").endswith(">"):
            open_placeholder = False
    return joined


def _substitute(
    word: str, previous: str, placeholders: dict[str, str], by_option: dict[tuple[str, str], str]
) -> str:
    if (previous, word) in by_option:
        return by_option[previous, word]
    if previous == "--port":
        return str(free_port())  # the README's port may be taken on this machine
    if word in placeholders:
        return placeholders[word]
    if re.fullmatch(r"<[^>]+>", word) or (
        re.fullmatch(r"[A-Z][A-Z0-9_]*", word) and word not in LITERALS
    ):
        raise AssertionError(
            f"README placeholder {word!r} has no substitution: add it to Demo.placeholders "
            f"in {Path(__file__).name}"
        )
    return word


def test_the_readme_is_read_as_documented() -> None:
    sample = "\n".join(
        [
            "```bash",
            "make demo   # comment",
            "manage.py migrate",
            "```",
            "```python",
            "manage.py not_a_shell_block",
            "```",
            "```",
            'manage.py template add --name NAME [--body "Hi {{1}}"] [--param 1=name ...]',
            "manage.py campaign start|pause ID          # start [--at 2026-12-01]",
            "manage.py contacts import FILE [--rejects FILE]",
            "manage.py campaign status <campaign id> --json",
            "```",
        ]
    )
    commands = readme_commands(sample)
    assert commands == [
        ["make", "demo"],
        ["manage.py", "migrate"],
        ["manage.py", "template", "add", "--name", "NAME", "[--body", "Hi {{1}}]", "[--param",
         "1=name", "...]"],
        ["manage.py", "campaign", "start|pause", "ID"],
        ["manage.py", "contacts", "import", "FILE", "[--rejects", "FILE]"],
        ["manage.py", "campaign", "status", "<campaign", "id>", "--json"],
    ]  # fmt: skip
    values = {"NAME": "promo", "ID": "7", "FILE": "in.csv", "<campaign id>": "7"}
    options = {("--rejects", "FILE"): "out.csv"}
    assert expand(commands[2], values, options) == [
        [
            "manage.py",
            "template",
            "add",
            "--name",
            "promo",
            "--body",
            "Hi {{1}}",
            "--param",
            "1=name",
        ]
    ]
    assert expand(commands[3], values, options) == [
        ["manage.py", "campaign", "start", "7"],
        ["manage.py", "campaign", "pause", "7"],
    ]
    assert expand(commands[4], values, options) == [
        ["manage.py", "contacts", "import", "in.csv", "--rejects", "out.csv"]
    ]
    assert expand(commands[5], values, options) == [
        ["manage.py", "campaign", "status", "7", "--json"]
    ]
    with pytest.raises(AssertionError, match="'<list name>' has no substitution"):
        expand(["manage.py", "contacts", "import", "--list", "<list", "name>"], values, options)
    with pytest.raises(AssertionError, match="'WABA_ID' has no substitution"):
        expand(["manage.py", "phonenumber", "add", "--waba", "WABA_ID"], values, options)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """The demo's processes on the test database, and a shell's environment beside them."""
    env_file = tmp_path / ".env"
    secret_key = env_file_write_development(env_file)  # as `make demo` writes ./.env
    services = {**service_environment(), "WHATSBLAST_DATA_DIR": str(tmp_path / "data")}
    web = f"http://127.0.0.1:{free_port()}"
    sim_port = free_port()
    app_secret = "readme-app-secret"  # noqa: S105 - the test's own
    group = ProcessGroup(
        tmp_path / "logs",
        {
            **services,
            "DEBUG": "1",
            "SECRET_KEY": secret_key,
            "WHATSAPP_APP_SECRET": app_secret,
            "WHATSAPP_VERIFY_TOKEN": "readme-verify",
            "LOG_LEVEL": "WARNING",
        },
    )
    group.manage(
        "simulator", "simulator", "--port", str(sim_port),
        "--number", f"{NUMBER_ID}:{NUMBER_TOKEN}:80",
        "--template", f"{NAME}:en_US:1",
        "--callback-url", f"{web}/webhooks/whatsapp", f"--app-secret={app_secret}",
    )  # fmt: skip
    group.start(
        "web",
        ["-m", "gunicorn", "whatsblast.asgi", "--worker-class", "asgi",
         "--bind", web.removeprefix("http://"), "--workers", "1"],
    )  # fmt: skip
    group.manage("worker", "rqworker", "transactional", "campaigns", "maintenance")
    group.manage("ticker", "ticker", "--every", "1")
    try:
        for url in (f"http://127.0.0.1:{sim_port}/_sim/stats", f"{web}/healthz"):
            try:
                wait_for_http(url)
            finally:
                group.check()  # a process that died names itself with its log
        contacts = tmp_path / "contacts.csv"
        # Enough recipients that the campaign is still sending when the README pauses,
        # resumes and cancels it (80 msg/s), and one row the import rejects.
        rows = [f"+55119{i:08d},Customer {i}" for i in range(CONTACTS)]
        contacts.write_text("\n".join(["phone,name", *rows, "not a phone,Carla", ""]))
        shell = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DEBUG", "SECRET_KEY") and not k.startswith("PYTEST")
        }
        yield Demo(
            env={**shell, **services, "WHATSBLAST_ENV_FILE": str(env_file)},
            simulator_url=f"http://127.0.0.1:{sim_port}",
            contacts=contacts,
            rejects=tmp_path / "rejects.csv",
        )
        group.check()  # the demo's processes outlived every command
    finally:
        group.stop()


def python_argv(argv: list[str]) -> list[str]:
    """``manage.py …`` as ``.venv/bin/python manage.py …`` (this interpreter)."""
    return [sys.executable, *argv] if argv[0] == "manage.py" else argv


def run_once(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the README's own commands
        python_argv(argv), env=env, cwd=BASE_DIR, capture_output=True, text=True, timeout=300
    )


def sigterm_caught(pid: int) -> bool:
    """Whether the process has its own SIGTERM handler yet (Linux: SigCgt in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def run_server(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Start a command that serves until stopped; it must stay up, then stop on SIGTERM."""
    process = subprocess.Popen(  # noqa: S603 - the README's own commands
        python_argv(argv),
        env=env,
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    port = argv[argv.index("--port") + 1] if "--port" in argv else ""
    try:
        if port:
            wait_for_http(f"http://127.0.0.1:{port}/_sim/stats")
        time.sleep(SERVER_UP_S)
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while (
            argv[1] in CATCH_SIGTERM
            and process.poll() is None
            and not sigterm_caught(process.pid)
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        if process.poll() is not None:
            output, _ = process.communicate()
            return process.returncode or -1, f"ended on its own:\n{output}"
        os.killpg(process.pid, signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
        return process.returncode, output
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_every_readme_command_runs_as_written(demo: Demo) -> None:
    commands = readme_commands(README.read_text(encoding="utf-8"))
    ran: list[str] = []
    for command in commands:
        if tuple(command) in RUN_BY_CI:
            continue
        for argv in expand(command, demo.placeholders(), demo.by_option()):
            label = shlex.join(argv)
            if argv[0] == "manage.py" and argv[1] in SERVERS:
                code, output = run_server(argv, demo.env)
            else:
                done = run_once(argv, demo.env)
                code, output = done.returncode, done.stdout + done.stderr
                if argv[1:3] == ["campaign", "create"] and code == 0:
                    demo.campaign_id = done.stdout.split()[-1]
            assert code == 0, f"{label} exited {code}:\n{output}"
            assert "Traceback" not in output, f"{label}:\n{output}"
            ran.append(label)
    # The README's operator commands are all here, each run at least once.
    subcommands = {tuple(label.split()[1:3]) for label in ran if label.startswith("manage.py")}
    for expected in (
        ("phonenumber", "add"),
        ("template", "add"),
        ("contacts", "import"),
        ("campaign", "create"),
        ("campaign", "start"),
        ("campaign", "status"),
    ):
        assert expected in subcommands, f"{expected} not in the README's commands: {ran}"
    assert demo.campaign_id.isdigit()
    reachable = requests.get(f"{demo.simulator_url}/_sim/stats", timeout=5)
    assert reachable.ok
