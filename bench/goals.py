"""What a bench promises: its goals, whether its figures met them, and the machine's load.

Every bench prints one JSON line; ``verdict`` gives the keys it ends with:

    goal        {figure: "<= 1.5"} for every goal (a figure names a key of the line,
                dotted for a nested one: "cold.overhead_ratio")
    met         true when every goal's figure was measured and met it; null when the bench
                has no goal yet (it reports figures nobody has set a target for)
    unmet       the figures that missed their goal or were not measured (null)
    load_avg    the machine's 1-, 5- and 15-minute load averages when the line was made
                (``os.getloadavg``): a loaded machine explains a slow run, not a wrong one
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Mapping
from typing import Any

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
}


def figure(figures: Mapping[str, Any], name: str) -> Any:
    """The value at ``name`` ("a.b" for ``figures["a"]["b"]``); None when absent."""
    value: Any = figures
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def verdict(figures: Mapping[str, Any], goals: Mapping[str, tuple[str, float]]) -> dict[str, Any]:
    """``goal``, ``met``, ``unmet`` and ``load_avg`` for ``figures`` against ``goals``.

    Args:
        figures: the bench's figures (JSON-ready).
        goals: figure name → (comparison, limit): ``{"overhead_ratio": ("<=", 1.5)}``;
            the comparison is one of ``<=``, ``>=``, ``==``.

    Raises:
        KeyError: an unknown comparison.
    """
    unmet = []
    for name, (compare, limit) in goals.items():
        value = figure(figures, name)
        if not isinstance(value, int | float) or not _COMPARE[compare](value, limit):
            unmet.append(name)
    return {
        "goal": {name: f"{compare} {limit}" for name, (compare, limit) in goals.items()},
        "met": not unmet if goals else None,
        "unmet": unmet,
        "load_avg": [round(n, 2) for n in os.getloadavg()],
    }
