"""bot: the Slack edge, Dramatiq wiring, settings and the `warroom` CLI."""

from .background import Background
from .chat import run_chat
from .doctor import CheckResult, run_checks
from .intake import Intake
from .logs import log_context, setup_logging
from .metrics import Metrics, StepReport, default_metrics, start_metrics_server
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
    # running it: serve, chat, doctor, skill folders
    "CheckResult",
    "SkillReport",
    "export_skills",
    "import_skills",
    "run_chat",
    "run_checks",
    "run_serve",
    # observability
    "Metrics",
    "StepReport",
    "default_metrics",
    "log_context",
    "setup_logging",
    "start_metrics_server",
]
