"""A demo process that ends on its own stops the demo with a plain error naming it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from whatsblast.core.processes import ChildExited, ProcessGroup
from whatsblast.management.commands.demo import child_exit_error


def test_a_child_that_ended_is_named_with_its_exit_code_and_its_log(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path, {})
    dies = "print('lost the database'); raise SystemExit(3)"
    group.start("ticker", [sys.executable, "-c", dies], python=False)
    group.start("web", [sys.executable, "-c", "import time; time.sleep(30)"], python=False)
    try:
        deadline = time.monotonic() + 10
        while group.children[0].alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ChildExited) as raised:
            group.check()
        assert raised.value.child.name == "ticker"

        error = child_exit_error(raised.value, group)
        assert isinstance(error, CommandError)
        message = str(error)
        assert message.startswith("ticker exited with 3:")
        assert "lost the database" in message
        assert str(tmp_path) in message
    finally:
        group.stop()
    assert group.children == []


def test_children_still_running_pass_the_check(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path, {})
    group.start("web", [sys.executable, "-c", "import time; time.sleep(30)"], python=False)
    try:
        group.check()
    finally:
        group.stop()
