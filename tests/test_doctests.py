"""Every docstring example in the four packages runs and holds.

Modules are found by their text (a ``>>>`` line), so a module that gains examples is tested
without anyone adding it to a list.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "harness", "memory_store", "sandbox_client")


def _modules_with_examples() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                names.append(".".join(p for p in parts if p != "__init__"))
    return names


MODULES = _modules_with_examples()


def test_the_examples_are_found() -> None:
    assert len(MODULES) >= 30
    assert "harness.vfs" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has '>>> ' text but no example doctest can run"
    assert result.failed == 0
