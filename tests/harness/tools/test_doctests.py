"""The doctest examples in the search tools' pure modules hold."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from harness.tools import bounds, persisted, ripgrep, search, search_output


@pytest.mark.parametrize("module", [search, search_output, persisted, ripgrep, bounds])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0
