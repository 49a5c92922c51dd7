"""Monitor's and WebFetch's input errors are Claude Code 2.1.336's (captured with its
``claude -p`` against a scripted Messages API): the schema validator's issue list as
indented JSON, for inputs its schema refuses. No sandbox is reached for them."""

from __future__ import annotations

import pytest

from harness.tools.background import MonitorInput, monitor_input_error, monitor_started_text

CUSTOM = """<tool_use_error>InputValidationError: [
  {
    "code": "custom",
    "path": [],
    "message": "exactly one of command or ws"
  }
]</tool_use_error>"""

TOO_SMALL = """<tool_use_error>InputValidationError: [
  {
    "origin": "number",
    "code": "too_small",
    "minimum": 1000,
    "inclusive": true,
    "path": [
      "timeout_ms"
    ],
    "message": "Too small: expected number to be >=1000"
  }
]</tool_use_error>"""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"description": "no command"}, CUSTOM),
        ({"description": "both", "command": "x", "ws": {"url": "ws://h/"}}, CUSTOM),
        ({"description": "tiny", "command": "x", "timeout_ms": 10}, TOO_SMALL),
    ],
)
def test_a_monitor_input_its_schema_refuses_gets_claude_codes_error(
    raw: dict[str, object], expected: str
) -> None:
    refused = monitor_input_error(MonitorInput.model_validate(raw))
    assert refused is not None
    assert refused.is_error
    assert refused.content == expected


def test_a_good_monitor_input_passes_and_its_start_reads_as_claude_codes() -> None:
    good = MonitorInput.model_validate({"description": "d", "command": "tail -f x"})
    assert monitor_input_error(good) is None
    assert good.timeout_ms_or_default() == 300_000
    assert monitor_started_text("bj01rkztk", 300_000) == (
        "Monitor started (task bj01rkztk, expires in 5m unless the source ends first; you get "
        "one notice at expiry \u2014 re-arm if you still need the watch). You will be notified "
        "on each event. Keep working \u2014 do not poll or sleep. Events may arrive while you "
        "are waiting for the user \u2014 an event is not their reply."
    )
