"""bot: the Slack edge, Dramatiq wiring, settings and the `warroom` CLI.

The door is lazy (PEP 562): importing ``bot`` loads nothing else, and each name below is imported
from its module on first use. A worker process therefore never loads the drill, the fakes or the
CLI unless it asks for them, and ``warroom version`` starts in well under a second.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.cli.chat import run_chat
    from bot.cli.doctor import CheckResult, run_checks
    from bot.cli.serve import run_serve
    from bot.cli.skills_io import SkillReport, export_skills, import_skills
    from bot.drill import DrillOptions, DrillResult, run_drill
    from bot.durable.actors import Actors, EmbeddedWorker, crash_from, declare_actors, make_broker
    from bot.durable.crash_points import CrashPoint
    from bot.durable.driver import StepDriver
    from bot.durable.wiring import Runtime, cancel_running, kill_in_flight
    from bot.logs import log_context, setup_logging
    from bot.metrics import (
        Metrics,
        StepOutcome,
        StepReport,
        default_metrics,
        start_metrics_server,
    )
    from bot.slack.app import SlackDeps, build_app
    from bot.slack.background import Background
    from bot.slack.intake import Intake
    from bot.slack.modes import HttpMode, RunningSlack, SocketMode, serve, start

_WHERE: dict[str, str] = {
    "run_chat": "bot.cli.chat",
    "CheckResult": "bot.cli.doctor",
    "run_checks": "bot.cli.doctor",
    "run_serve": "bot.cli.serve",
    "SkillReport": "bot.cli.skills_io",
    "export_skills": "bot.cli.skills_io",
    "import_skills": "bot.cli.skills_io",
    "DrillOptions": "bot.drill",
    "DrillResult": "bot.drill",
    "run_drill": "bot.drill",
    "Actors": "bot.durable.actors",
    "EmbeddedWorker": "bot.durable.actors",
    "crash_from": "bot.durable.actors",
    "declare_actors": "bot.durable.actors",
    "make_broker": "bot.durable.actors",
    "CrashPoint": "bot.durable.crash_points",
    "StepDriver": "bot.durable.driver",
    "StepOutcome": "bot.metrics",
    "Runtime": "bot.durable.wiring",
    "cancel_running": "bot.durable.wiring",
    "kill_in_flight": "bot.durable.wiring",
    "log_context": "bot.logs",
    "setup_logging": "bot.logs",
    "Metrics": "bot.metrics",
    "StepReport": "bot.metrics",
    "default_metrics": "bot.metrics",
    "start_metrics_server": "bot.metrics",
    "SlackDeps": "bot.slack.app",
    "build_app": "bot.slack.app",
    "Background": "bot.slack.background",
    "Intake": "bot.slack.intake",
    "HttpMode": "bot.slack.modes",
    "RunningSlack": "bot.slack.modes",
    "SocketMode": "bot.slack.modes",
    "serve": "bot.slack.modes",
    "start": "bot.slack.modes",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use.

    Raises:
        AttributeError: ``name`` is not one of ``__all__``.
    """
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'bot' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    # the Slack app and how it runs
    "Background",
    "HttpMode",
    "Intake",
    "RunningSlack",
    "SlackDeps",
    "SocketMode",
    "build_app",
    "serve",
    "start",
    # running it: serve, chat, doctor, skill folders, the drill
    "CheckResult",
    "DrillOptions",
    "DrillResult",
    "SkillReport",
    "export_skills",
    "import_skills",
    "run_chat",
    "run_checks",
    "run_drill",
    "run_serve",
    # durable sessions: the broker, the advance actor, the step driver, stop
    "Actors",
    "CrashPoint",
    "EmbeddedWorker",
    "Runtime",
    "StepDriver",
    "StepOutcome",
    "cancel_running",
    "crash_from",
    "declare_actors",
    "kill_in_flight",
    "make_broker",
    # observability
    "Metrics",
    "StepReport",
    "default_metrics",
    "log_context",
    "setup_logging",
    "start_metrics_server",
]
