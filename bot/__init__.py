"""bot: the Slack edge, Dramatiq wiring, settings and the `warroom` CLI."""

from .background import Background
from .chat import run_chat
from .doctor import CheckResult, run_checks
from .drill import DrillOptions, DrillResult, run_drill
from .intake import Intake
from .logs import log_context, setup_logging
from .metrics import Metrics, StepReport, default_metrics, start_metrics_server
from .queue import Actors, EmbeddedWorker, crash_from, declare_actors, make_broker
from .runner import CrashPoint, StepDriver, StepOutcome
from .runtime import Runtime, cancel_running, kill_in_flight
from .serve import run_serve
from .skills_io import SkillReport, export_skills, import_skills
from .slack_app import SlackDeps, build_app
from .slack_runtime import HttpMode, RunningSlack, SocketMode, serve, start

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
