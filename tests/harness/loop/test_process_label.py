"""A lost sandbox process is told to people by what it ran, never by its ``tool_use`` id."""

from __future__ import annotations

from harness import Checkpoint, Message, Requester
from harness.loop.step import process_label
from harness.model.messages import ToolUseBlock
from sandbox_client import Loss


def _with_call(block: ToolUseBlock) -> Checkpoint:
    """A session whose last assistant message made ``block``."""
    return Checkpoint("s1", "T1", "C1", Requester("U1"), messages=(Message("assistant", (block,)),))


def test_a_stopped_command_lost_with_its_sandbox_is_named_by_its_command() -> None:
    # Given a session whose long command was running when a stop destroyed its sandbox
    cp = _with_call(ToolUseBlock("toolu_01AbC", "Bash", {"command": "sleep 600"}))
    loss = Loss("sbx-old", "sbx-new", running_processes=("toolu_01AbC", "toolu_01AbC.so-far"))

    # When the thread is told what was lost
    told = loss.describe(name=lambda process: process_label(cp, process))

    # Then it names the command, once, and no internal id
    assert "Processes that were still running are gone: `sleep 600`." in told
    assert "toolu_" not in told


def test_another_tool_is_named_by_its_summary_and_an_unknown_process_plainly() -> None:
    cp = _with_call(ToolUseBlock("toolu_02", "Read", {"file_path": "/incident/notes.md"}))

    assert process_label(cp, "toolu_02") == "Read /incident/notes.md"
    assert process_label(cp, "toolu_99") == "a command"
