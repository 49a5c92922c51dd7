"""The doctest examples of the watched channels' message readers hold."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from bot.alerts import slack_alert, slack_view


@pytest.mark.parametrize("module", [slack_view, slack_alert])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0
