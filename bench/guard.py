"""Benchmark the bash guard over the labelled corpus; print one JSON line.

Usage: ``python bench/guard.py [ROUNDS]`` (default 20 rounds over the corpus after one
warm-up round). Figures: ``p50_us`` and ``p99_us`` per ``check_bash`` call in
microseconds, the number of corpus commands, recall on decidable positives and the
false-positive rate on negatives (the issue's bar: recall ≥ 0.98, fpr ≤ 0.02).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# bench/ holds scripts named like our packages (bench/memory_store.py): the repo root
# must come first on the import path.
sys.path.insert(0, str(REPO))

from harness import Deny, check_bash  # noqa: E402

CORPUS_FILE = REPO / "tests" / "harness" / "data" / "bash_guard_public.jsonl"


def _load() -> list[dict[str, object]]:
    lines = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _quality(rows: list[dict[str, object]]) -> tuple[float, float]:
    positives = [r for r in rows if r["touches_virtual"] and r["decidable"]]
    negatives = [r for r in rows if not r["touches_virtual"]]
    refused = {str(r["command"]) for r in rows if isinstance(check_bash(str(r["command"])), Deny)}
    recall = sum(str(r["command"]) in refused for r in positives) / len(positives)
    fpr = sum(str(r["command"]) in refused for r in negatives) / len(negatives)
    return recall, fpr


def _timings_us(commands: list[str], rounds: int) -> list[float]:
    for command in commands:
        check_bash(command)
    samples = []
    for _ in range(rounds):
        for command in commands:
            started = time.perf_counter_ns()
            check_bash(command)
            samples.append((time.perf_counter_ns() - started) / 1000)
    return samples


def main() -> None:
    """Run the benchmark and print the JSON line."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rows = _load()
    recall, fpr = _quality(rows)
    samples = sorted(_timings_us([str(r["command"]) for r in rows], rounds))
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    figures = {
        "p50_us": round(statistics.median(samples), 1),
        "p99_us": round(p99, 1),
        "commands": len(rows),
        "recall": round(recall, 3),
        "fpr": round(fpr, 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
