"""The alerting apps' messages of ``tests/bot/data/alerts`` (see its README)."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent.parent / "data" / "alerts"
_ids = itertools.count(1)


def alert_body(name: str, **changes: Any) -> dict[str, Any]:
    """An Events API body from ``tests/bot/data/alerts/<name>.json``, a fresh
    ``event_id``, and ``event`` fields changed (``ts`` also sets ``event_ts``)."""
    body: dict[str, Any] = copy.deepcopy(json.loads((DATA / f"{name}.json").read_text()))
    body["event_id"] = f"Ev0AL{next(_ids):07d}"
    if "ts" in changes:
        changes.setdefault("event_ts", changes["ts"])
    body["event"].update(changes)
    return body
