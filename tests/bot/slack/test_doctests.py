"""The doctest examples of the Slack app's pure modules hold (text, parsing, routing, context)."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from bot.slack import (
    content,
    egress,
    files,
    inbound,
    installation,
    render,
    retries,
    routing,
    thread_context,
    watch,
)
from bot.slack import text as slack_text


@pytest.mark.parametrize(
    "module",
    [
        slack_text,
        inbound,
        routing,
        thread_context,
        content,
        files,
        installation,
        render,
        retries,
        egress,
        watch,
    ],
)
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0
