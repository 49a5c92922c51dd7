"""The incident drill: a whole scripted incident against fake Slack and Anthropic APIs.

``warroom drill`` runs it, and so do the tests: the real Slack app (HTTP mode, signed
requests), real workers (in-process, or ``dramatiq`` processes over Redis), real
local sandboxes and a real database, with a scripted model (``IncidentPolicy``)
standing in for Claude. It prints a live log and a checklist of the properties it
proves, and returns a ``DrillResult``.
"""

from bot.drill.agent import IncidentPolicy
from bot.drill.checks import Check
from bot.drill.errors import DrillError, DrillStalled
from bot.drill.run import DrillResult, drill, run_drill
from bot.drill.stage import DrillOptions

__all__ = [
    "Check",
    "DrillError",
    "DrillOptions",
    "DrillResult",
    "DrillStalled",
    "IncidentPolicy",
    "drill",
    "run_drill",
]
