"""The worker launcher: the worker code is imported before Dramatiq's CLI forks (issue #32.2)."""

from __future__ import annotations

import json
import subprocess
import sys

from bot.cli.worker import LAUNCHER, WORKER_MODULE, dramatiq_argv

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
