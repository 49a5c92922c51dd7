"""CPU of the container health check, ``warroom doctor --quick``, against its floors.

The image's ``HEALTHCHECK`` runs it every 30 s in every container, so its CPU is paid
all the time. Each round runs, one after another, in fresh processes (the CPU of each,
user + system, is the ``resource.getrusage(RUSAGE_CHILDREN)`` difference around it):

    floor_cpu_s       ``python -c pass``: an interpreter's start
    libraries_cpu_s   importing what the quick checks need and Warroom does not own
                      (``typer``, ``pydantic_settings``, ``sqlite3``; ``asyncpg`` with a
                      PostgreSQL ``--database-url``, ``redis.asyncio`` with ``--redis-url``:
                      the quick database check reads the schema with the driver alone)
    doctor_cpu_s      ``warroom doctor --quick`` on a migrated SQLite database in a
                      temporary data directory (or ``--database-url``), no Redis unless
                      ``--redis-url``

Prints one JSON line: the medians over ``--rounds`` (default 5), ``doctor_over_floor_s``
(doctor − floor), ``ours_cpu_s`` (doctor − libraries: what Warroom's own code adds), the
goal (``doctor_cpu_s`` ≤ 0.3, issue 31), ``met`` and the load average (``bench/goals.py``).

    .venv/bin/python bench/doctor_quick.py [--rounds 5] [--database-url URL] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from goals import verdict  # bench/ is on the path when run as a script

GOALS = {"doctor_cpu_s": ("<=", 0.3)}
LIBRARIES = "import typer, pydantic_settings, sqlite3"
WARROOM = [sys.executable, "-c", "from bot.cli.app import main; main()"]


def child_cpu_s(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """CPU seconds (user + system) ``command`` used; it must exit 0.

    Raises:
        subprocess.CalledProcessError: it failed (its output is in the exception).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(rounds: int, database_url: str | None, redis_url: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="wr-doctor-") as tmp:
        cwd = Path(tmp)  # no .env here
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARROOM_")}
        env |= {"WARROOM_DATA_DIR": str(cwd / "data")}
        for name, value in (("DATABASE_URL", database_url), ("REDIS_URL", redis_url)):
            env.pop(name, None)
            if value:
                env[name] = value
        subprocess.run([*WARROOM, "migrate"], env=env, cwd=cwd, check=True, capture_output=True)
        samples: dict[str, list[float]] = {"floor": [], "libraries": [], "doctor": []}
        for _ in range(rounds):
            samples["floor"].append(child_cpu_s([sys.executable, "-c", "pass"], env, cwd))
            libraries = LIBRARIES + (", asyncpg" if database_url else "")
            libraries += ", redis.asyncio" if redis_url else ""
            samples["libraries"].append(child_cpu_s([sys.executable, "-c", libraries], env, cwd))
            samples["doctor"].append(child_cpu_s([*WARROOM, "doctor", "--quick"], env, cwd))
    median = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "doctor_cpu_s": round(median["doctor"], 3),
        "floor_cpu_s": round(median["floor"], 3),
        "libraries_cpu_s": round(median["libraries"], 3),
        "doctor_over_floor_s": round(median["doctor"] - median["floor"], 3),
        "ours_cpu_s": round(median["doctor"] - median["libraries"], 3),
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--redis-url", default=None)
    args = parser.parse_args()
    figures = measure(args.rounds, args.database_url, args.redis_url)
    print(json.dumps(figures | verdict(figures, GOALS)))


if __name__ == "__main__":
    main()
