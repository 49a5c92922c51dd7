"""``warroom chat`` prints the model's thinking summary as progress."""

from __future__ import annotations

import io

from bot.cli.terminal import TerminalReporter
from harness import Checkpoint, ModelResponded, Requester, Usage


async def test_the_thinking_summary_of_a_tool_call_is_printed_as_progress() -> None:
    out = io.StringIO()
    event = ModelResponded("tool_use", "", ("Bash: list pods",), Usage(), 1, "Check the pods.")

    await TerminalReporter(out).show_progress(
        session_id="s", channel_id="c", thread_ts="t",
        checkpoint=Checkpoint("s", "T", "C", Requester("U")), events=[event],
    )  # fmt: skip

    assert out.getvalue() == "  … Check the pods.\n"
