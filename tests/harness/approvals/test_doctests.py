"""The doctest examples in the approval policy's modules and the guard's call list hold."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from harness.approvals import http_clients, policy, reach, sql, unseen
from harness.guard import calls


@pytest.mark.parametrize("module", [policy, sql, http_clients, reach, unseen, calls])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0
