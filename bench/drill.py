"""How long the incident drill takes, and how fast it recovers from what it breaks.

Runs ``warroom drill`` quietly (embedded by default; the full mode with
``--database-url`` and ``--redis-url``) and prints one JSON line: whether it passed,
its wall time, when each session answered (seconds since alice's first message),
and the recovery times (a SIGKILLed worker's step recovered by another worker; a
destroyed sandbox replaced). Its goal: every run passes (``failed_runs`` 0).

    .venv/bin/python bench/drill.py [--database-url URL --redis-url URL] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

from goals import verdict  # bench/ is on the path when run as a script

from bot.drill import DrillOptions, run_drill


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    options = DrillOptions(database_url=args.database_url, redis_url=args.redis_url)
    results = [run_drill(options, say=lambda line: None) for _ in range(args.runs)]
    keys = sorted({k for r in results for k in r.timings})
    figures: dict[str, Any] = {
        "mode": options.mode,
        "runs": args.runs,
        "passed": sum(r.passed for r in results),
        "elapsed_s": _median([r.elapsed_s for r in results]),
    }
    figures |= {k: _median([r.timings[k] for r in results if k in r.timings]) for k in keys}
    goals = {"failed_runs": ("==", 0)}
    figures["failed_runs"] = args.runs - figures["passed"]
    print(json.dumps(figures | verdict(figures, goals)))


if __name__ == "__main__":
    main()
