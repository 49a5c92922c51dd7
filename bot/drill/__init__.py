"""The incident drill: a whole scripted incident against fake Slack and Anthropic APIs.

``warroom drill`` runs it, and so do the tests: the real Slack app (HTTP mode, signed
requests), real workers (in-process, or ``dramatiq`` processes over Redis), real
local sandboxes and a real database, with a scripted model (``IncidentPolicy``)
standing in for Claude. It prints a live log and a checklist of the properties it
proves, and returns a ``DrillResult``.

The door is lazy (PEP 562): ``warroom fake-slack`` plays the channel with
``bot.drill.channel`` alone, without loading the drill's workers, store and agent.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULES: dict[str, tuple[str, ...]] = {
    "bot.drill.agent": ("IncidentPolicy",),
    "bot.drill.checks": ("Check",),
    "bot.drill.errors": ("DrillError", "DrillStalled"),
    "bot.drill.run": ("DrillResult", "drill", "run_drill"),
    "bot.drill.stage": ("DrillOptions",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of the door, imported from its module on first use (then kept here)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
