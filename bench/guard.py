"""Benchmark the bash guard over the labelled corpus; print one JSON line.

Usage: ``python bench/guard.py [ROUNDS]`` (default 20 rounds over the corpus after one
warm-up round). Figures: ``p50_us`` and ``p99_us`` per ``check_bash`` call in
microseconds, the number of corpus commands, recall on decidable positives and the
false-positive rate on negatives (the issue's bar: recall ≥ 0.98, fpr ≤ 0.02), the same
two on the project's own labelled cases (``own_recall``, ``own_fpr``), and the worst
case: ``hostile_max_ms``, the longest ``check_bash`` call on 15–62 KB wrapper chains and
nested arrays, with ``hostile_bound_ratio`` = that time / the analysis budget
(``budget.MAX_ANALYSIS_S``; near 1 means the bound, not the input, decided).
``cpu_p99_us`` is the p99 in the thread's CPU time (what an overloaded machine's time slices
do not inflate, unlike the wall-clock ``p99_us``), with ``load_1m`` the load average then.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# bench/ holds scripts named like our packages (bench/memory_store.py): the repo root
# must come first on the import path.
sys.path.insert(0, str(REPO))

from harness import Deny, check_bash  # noqa: E402
from harness.guard.budget import MAX_ANALYSIS_S  # noqa: E402

DATA = REPO / "tests" / "harness" / "data"
CORPUS_FILE = DATA / "bash_guard_public.jsonl"
OWN_FILE = DATA / "bash_guard_techniques.jsonl"
HOSTILE = [
    "sudo -u root " * 1_200 + "cat /mem*/x",
    "sudo -u root " * 4_800 + "cat /mem*/x",
    "env A=1 " * 6_000 + "ls",
    "timeout 5 " * 5_000 + "ls",
    "xargs -n 1 " * 4_000 + "ls",
    "sudo env A=1 timeout 5 xargs " * 1_500 + "ls",
    "a=(" * 2_000 + ")" * 2_000,
    "a=(" * 5_000 + ")" * 5_000,
    "a=(" * 10_000 + ")" * 10_000,
]
"""Commands of 15–62 KB that made the guard's time grow faster than its input."""


def _load(path: Path = CORPUS_FILE) -> list[dict[str, object]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _worst_ms(commands: list[str]) -> float:
    worst = 0.0
    for command in commands:
        started = time.perf_counter()
        check_bash(command)
        worst = max(worst, time.perf_counter() - started)
    return worst * 1000


def _quality(rows: list[dict[str, object]]) -> tuple[float, float]:
    positives = [r for r in rows if r["touches_virtual"] and r["decidable"]]
    negatives = [r for r in rows if not r["touches_virtual"]]
    refused = {str(r["command"]) for r in rows if isinstance(check_bash(str(r["command"])), Deny)}
    recall = sum(str(r["command"]) in refused for r in positives) / len(positives)
    fpr = sum(str(r["command"]) in refused for r in negatives) / len(negatives)
    return recall, fpr


def _timings_us(commands: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """Wall-clock and thread CPU microseconds of each ``check_bash`` call."""
    for command in commands:
        check_bash(command)
    wall, cpu = [], []
    for _ in range(rounds):
        for command in commands:
            started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
            check_bash(command)
            cpu.append((time.thread_time_ns() - started_cpu) / 1000)
            wall.append((time.perf_counter_ns() - started) / 1000)
    return wall, cpu


def main() -> None:
    """Run the benchmark and print the JSON line."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rows = _load()
    recall, fpr = _quality(rows)
    own_recall, own_fpr = _quality(_load(OWN_FILE))
    wall, cpu = _timings_us([str(r["command"]) for r in rows], rounds)
    samples, cpu = sorted(wall), sorted(cpu)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    figures = {
        "p50_us": round(statistics.median(samples), 1),
        "p99_us": round(p99, 1),
        "cpu_p99_us": round(cpu[min(len(cpu) - 1, int(len(cpu) * 0.99))], 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "commands": len(rows),
        "recall": round(recall, 3),
        "fpr": round(fpr, 3),
        "own_recall": round(own_recall, 3),
        "own_fpr": round(own_fpr, 3),
        "hostile_kb": [round(len(c) / 1024, 1) for c in HOSTILE],
    }
    hostile_ms = _worst_ms(HOSTILE)
    figures["hostile_max_ms"] = round(hostile_ms)
    figures["hostile_bound_ratio"] = round(hostile_ms / (MAX_ANALYSIS_S * 1000), 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
