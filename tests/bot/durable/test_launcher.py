"""The worker launcher: the worker code is imported before Dramatiq's CLI forks (issue #32.2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bot.cli.worker import LAUNCHER, WORKER_MODULE, dramatiq_argv
from bot.durable.worker_limits import WORKER_TIMEOUT_MS

# Dramatiq's CLI replaced by a probe that reports what the parent holds when it would fork
PROBE = """
import json, sys
import dramatiq.cli
def probe(args):
    print(json.dumps({
        "harness": "harness" in sys.modules,
        "wiring": "bot.durable.wiring" in sys.modules,
        "worker_main": "bot.durable.worker_main" in sys.modules,
        "processes": args.processes,
        "modules": args.modules,
        "broker": args.broker,
    }))
    return 7
dramatiq.cli.main = probe
from bot.durable.launcher import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_parent_imports_the_worker_code_and_runs_dramatiqs_cli_with_its_arguments() -> None:
    argv = dramatiq_argv(processes=3, threads=2, with_metrics=False, python=sys.executable)
    assert argv[1:3] == ["-m", LAUNCHER]
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, *argv[3:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 7, ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    # the parent has the harness and the runtime's code before Dramatiq forks
    assert seen["harness"]
    assert seen["wiring"]
    # but not the worker module itself: each worker process runs its body (broker, settings)
    assert not seen["worker_main"]
    assert seen["processes"] == 3
    assert seen["broker"] == WORKER_MODULE


# ``warroom worker``'s order: its environment, then the checks that import the worker code
ORDER = """
import json, sys
from bot.cli.worker import prepare_worker_env
from bot.cli.preflight import problems
from bot.settings import Settings
settings = Settings()
prepare_worker_env(settings, threads=3)
problems(settings)
import dramatiq.worker
import prometheus_client.values
print(json.dumps({
    "poll_ms": dramatiq.worker.WORKER_TIMEOUT,
    "prefetch": dramatiq.worker.QUEUE_PREFETCH,
    "metrics": prometheus_client.values.ValueClass.__name__,
}))
"""


def test_the_workers_environment_is_set_before_dramatiq_and_prometheus_read_it(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARROOM_", "dramatiq_"))}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env |= {"WARROOM_METRICS_PORT": "9", "WARROOM_DATA_DIR": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "-c", ORDER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    # Dramatiq polls and prefetches as the worker wants, not its defaults (1,000 ms, 0)
    assert seen["poll_ms"] == WORKER_TIMEOUT_MS
    assert seen["prefetch"] == 3
    # and the processes' metrics go to the shared directory (not each process's memory)
    assert seen["metrics"] == "MmapedValue"
