"""``warroom fake-slack`` and ``warroom fake-anthropic`` start at once: they load none of the
agent (issue #26's second new-user trial found them slow to start; the harness, the
Anthropic SDK, MCP and the store cost about three CPU-seconds, and neither fake uses them).

Each test runs the real command with ``python -X importtime``, waits until it listens, stops
it, and reads every module it imported from that report (behaviour, not timing).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bot.cli_support import WARROOM

HEAVY = (
    "anthropic",
    "mcp",
    "memory_store",
    "sqlalchemy",
    "alembic",
    "sandbox_client",
    "dramatiq",
    "slack_bolt",
    "prometheus_client",
    "redis",
)
"""What only the bot, its workers and its store use."""
HARNESS_LIGHT = {"harness", "harness.model", "harness.model.catalog"}
"""The part of the harness a fake may load: the model catalog (the fake Messages API checks
requests against it), through the harness's lazy door."""
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", re.M)


def _imports_until_listening(tmp_path: Path, *arguments: str, ready: str) -> set[str]:
    """The modules ``warroom ARGUMENTS`` imported by the time it printed ``ready``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARROOM_", "SLACK_"))}
    report_path = tmp_path / "importtime.txt"  # a file: a full pipe would stall the command
    with report_path.open("w") as report_file:
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", WARROOM, *arguments, "--port", "0"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=report_file,
            text=True,
        )
        try:
            assert process.stdout is not None
            printed = ""
            while ready not in printed:
                line = process.stdout.readline()
                assert line, f"it exited first: {printed}{report_path.read_text()[-2000:]}"
                printed += line
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
    report = report_path.read_text()
    return set(IMPORTED.findall(report))


def _heavy(modules: set[str]) -> set[str]:
    """The modules of ``modules`` a fake has no use for (``HEAVY``, the harness but its
    catalog)."""
    return {
        name
        for name in modules
        if name.split(".")[0] in HEAVY or (name.startswith("harness") and name not in HARNESS_LIGHT)
    }


def test_fake_anthropic_listens_without_loading_the_agent(tmp_path: Path) -> None:
    loaded = _imports_until_listening(tmp_path, "fake-anthropic", ready="fake Anthropic API on")
    assert "aiohttp" in loaded  # the report was read
    assert _heavy(loaded) == set()


@pytest.mark.parametrize("playing", [False, True], ids=["api", "channel"])
def test_fake_slack_listens_without_loading_the_agent(tmp_path: Path, playing: bool) -> None:
    events_url = ("--events-url", "http://127.0.0.1:9/slack/events") if playing else ()
    ready = "the app's Request URL" if playing else "fake Slack Web API on"
    loaded = _imports_until_listening(tmp_path, "fake-slack", *events_url, ready=ready)
    assert "aiohttp" in loaded
    assert _heavy(loaded) == set()
