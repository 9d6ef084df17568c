"""The dependency direction holds, and the import contracts catch a break of it.

The contracts live in pyproject.toml ([tool.importlinter]) and docs/architecture.md says
what they mean. Here they run on the code as it is (kept) and on copies of it with one
wrong-way import or one cycle added (broken, naming the contract).
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from whatsblast.core import queues

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("campaigns", "delivery", "journeys", "webhooks", "whatsblast")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the project's own checker on its own tree
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the sources and the contracts, to break on purpose."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_code_keeps_every_contract() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_wrong_way_import_breaks_the_layers(tree: Path) -> None:
    # campaigns is below delivery: it may not ask delivery for anything.
    (tree / "campaigns" / "catalogue" / "shortcut.py").write_text(
        "from delivery.messages import release_messages\n"
    )

    done = lint_imports(tree)

    assert done.returncode != 0
    assert "Apps: the site calls webhooks" in done.stdout
    assert "BROKEN" in done.stdout
    assert "campaigns.catalogue.shortcut -> delivery.messages" in done.stdout


def test_an_app_importing_the_site_breaks_the_layers(tree: Path) -> None:
    (tree / "delivery" / "engine" / "reach_up.py").write_text("import whatsblast.jobs\n")

    done = lint_imports(tree)

    assert done.returncode != 0
    assert "delivery.engine.reach_up -> whatsblast.jobs" in done.stdout


def test_a_cycle_between_siblings_is_caught(tree: Path) -> None:
    # webhooks.payloads is imported by webhooks.statuses; importing back makes a cycle.
    payloads = tree / "webhooks" / "payloads.py"
    payloads.write_text(payloads.read_text() + "\nfrom webhooks import statuses  # noqa\n")

    done = lint_imports(tree)

    assert done.returncode != 0
    assert "No cycles between sibling modules" in done.stdout or "webhooks:" in done.stdout
    assert "BROKEN" in done.stdout


@pytest.mark.parametrize("job", queues.ALL_JOBS, ids=lambda job: job.path.rsplit(".", 1)[-1])
def test_every_job_named_for_the_queues_exists(job: queues.JobSpec) -> None:
    module, name = job.path.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), name))
    assert job.queue in queues.PRIORITY
