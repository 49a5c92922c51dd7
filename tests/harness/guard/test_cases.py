"""The bash guard on this project's own labelled cases, one per technique fixed here.

``data/bash_guard_techniques.jsonl`` has the shared corpus's format (``command``,
``touches_virtual``, ``why`` tagged ``[technique]``, ``decidable``), so the team's
scorer runs on it too. Labels follow the corpus rules: working directory
``/workspace``, ``HOME=/root``, bash 5; a touch is only what reaches a virtual path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import Deny, check_bash

CASES = Path(__file__).parents[1] / "data" / "bash_guard_techniques.jsonl"
ROWS: list[dict[str, Any]] = [
    json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line.strip()
]


def _row_id(row: dict[str, Any]) -> str:
    return f"{row['why'].split(']')[0].lstrip('[')}:{row['command'][:50]}"


@pytest.mark.parametrize("row", [row for row in ROWS if row["touches_virtual"]], ids=_row_id)
def test_refuses_labelled_command_that_reaches_a_namespace(row: dict[str, Any]) -> None:
    assert isinstance(check_bash(row["command"]), Deny), row["why"]


@pytest.mark.parametrize("row", [row for row in ROWS if not row["touches_virtual"]], ids=_row_id)
def test_allows_labelled_command_that_stays_off_the_namespaces(row: dict[str, Any]) -> None:
    decision = check_bash(row["command"])
    assert not isinstance(decision, Deny), (row["why"], decision)
