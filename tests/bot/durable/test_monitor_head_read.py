"""The monitor's head check against a read that fails (red team 3): like every other read of
a look, it is "nothing known this look", not "the file begins differently" (which would
restart the mark at 0 and deliver every line again)."""

from __future__ import annotations

from typing import cast

import httpx

from harness.tools.background import task_id_for
from sandbox_client import SandboxHandle
from sandbox_client.records import ProcessRecord, ProcessStatus

from .test_background_watcher import SESSION, Reading, monitor_looks, reading

__all__ = ["reading"]

TOOL_USE = "toolu_mon_r"
RUNNING = ProcessRecord(TOOL_USE, "cmd", ProcessStatus.RUNNING, None)


async def test_a_failed_head_read_does_not_redeliver_the_whole_file(reading: Reading) -> None:
    # Given a monitor whose first line was delivered (its head known: 11 bytes)
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 1)
    # When a second line is written and, in the next look, only the head check's read
    # (a bounded range, bytes=0-10) fails with a 500
    with reading.output.open("ab") as output:
        output.write(b"second line\n")
    answer = reading.server.answer

    def head_read_fails(request: httpx.Request) -> httpx.Response:
        wanted = request.headers["range"]
        if wanted.startswith("bytes=0-") and wanted != "bytes=0-":
            return httpx.Response(500, json={"error": "internal"})
        return answer(request)

    reading.server.answer = head_read_fails  # type: ignore[method-assign]
    task = await reading.tasks.get(SESSION, task_id_for(TOOL_USE))
    assert task is not None
    await reading.watcher._monitor(cast(SandboxHandle, None), task, RUNNING)
    del reading.server.answer
    events = await monitor_looks(reading, 3)
    # Then each line is delivered once (a failed read means "look again later", not
    # "the file was cut")
    assert sum("first line" in e for e in events) == 1, events
    assert sum("second line" in e for e in events) == 1, events
