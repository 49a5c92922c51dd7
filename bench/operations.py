"""Benchmark of running Warroom: observability overhead, the health check, a chat turn.

Run: ``.venv/bin/python bench/operations.py``. Prints one JSON line:
    observe_step_us_p50      counting one step (a model response and three tool results)
    log_line_us_p50          one INFO line through the context filter and the text format
    doctor_quick_s           ``warroom doctor --quick`` (the container health check), wall time,
                             median of 3 (process start included)
    chat_turn_s              ``warroom chat``: start, one message answered by the fake
                             Messages API, exit — wall time, median of 3

No goal is set for these figures yet: ``goal`` is empty, ``met`` null (``bench/goals.py``).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import verdict  # bench/ is on the path when run as a script
from prometheus_client import CollectorRegistry

from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply
from bot.logs import log_context, setup_logging
from bot.metrics import Metrics, StepReport
from harness import ModelResponded, ToolFinished, Usage

WARROOM = str(Path(sys.executable).parent / "warroom")
_OURS = ("WARROOM_", "SLACK_", "ANTHROPIC_", "BL_", "DATABASE_URL", "REDIS_URL")


def _p50_us(action: Callable[[], None], runs: int) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1e6)
    return round(statistics.median(timings), 2)


def _observe_step_us() -> float:
    metrics = Metrics(CollectorRegistry())
    usage = Usage(input_tokens=1200, output_tokens=300, cache_read_input_tokens=9000)
    events = (
        ModelResponded("tool_use", "", ("Bash", "Read", "Grep"), usage, 1),
        *(
            ToolFinished(f"toolu_{i}", "Bash", "kubectl get pods", False, 100, "ok")
            for i in range(3)
        ),
    )
    report = StepReport("tool", "stepped", 0.42, events)
    return _p50_us(lambda: metrics.observe_step(report), 5000)


def _log_line_us() -> float:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    setup_logging("INFO", stream=io.StringIO())
    log = logging.getLogger("bench")
    try:
        with log_context(session_id="s" * 32, org_id="T0ORG", channel_id="C0INC"):
            return _p50_us(lambda: log.info("step %s committed", 7), 5000)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _env(data_dir: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
    return {**env, "WARROOM_DATA_DIR": data_dir, **extra}


def _wall_s(argv: list[str], env: dict[str, str], cwd: str, stdin: bytes = b"") -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, check=True)
    return time.perf_counter() - started


def _median_s(runs: list[float]) -> float:
    return round(statistics.median(runs), 2)


async def _chat_turn_s(data_dir: str) -> float:
    runs = []
    for _ in range(3):
        async with FakeAnthropicAPI([Reply.text("The pods are fine.")]) as fake:
            env = _env(data_dir, ANTHROPIC_API_KEY="fake", ANTHROPIC_BASE_URL=fake.base_url)
            runs.append(
                await asyncio.to_thread(
                    _wall_s, [WARROOM, "chat"], env, data_dir, b"checkout returns 500s\n"
                )
            )
    return _median_s(runs)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="wr-bench-") as data_dir:
        doctor = [
            _wall_s([WARROOM, "doctor", "--quick"], _env(data_dir), data_dir) for _ in range(3)
        ]
        figures = {
            "observe_step_us_p50": _observe_step_us(),
            "log_line_us_p50": _log_line_us(),
            "doctor_quick_s": _median_s(doctor),
            "chat_turn_s": asyncio.run(_chat_turn_s(data_dir)),
        }
    print(json.dumps(figures | verdict(figures, {})))  # no goal set yet: met is null


if __name__ == "__main__":
    main()
