"""Monitors that follow a cut output file (red team 2): a cut the 64-byte tail check
alone cannot see (repeating lines, a cut between a look's two reads) loses no line, and a
watcher of the previous release moving the mark does not make the file delivered again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import httpx

from harness import NOTIFICATION_KIND
from harness.tools.background import task_id_for
from memory_store.tasks.tables import background_tasks
from sandbox_client import SandboxHandle
from sandbox_client.records import ProcessRecord, ProcessStatus

from .test_background_watcher import SESSION, Reading, monitor_looks, reading

__all__ = ["reading"]  # the fixture, for pytest

TOOL_USE = "toolu_mon_r"  # ``monitor_looks``'s monitor
RUNNING = ProcessRecord(TOOL_USE, "cmd", ProcessStatus.RUNNING, None)
HANDLE = cast(SandboxHandle, None)
BEAT = b"heartbeat ok ..\n"  # 16 bytes: a monitor's steady line


async def test_a_cut_file_of_repeating_lines_loses_no_new_line(reading: Reading) -> None:
    # Given a monitor of a service's log of heartbeats whose first 8 (128 bytes) were
    # delivered
    reading.output.write_bytes(BEAT * 8)
    await monitor_looks(reading, 4)
    task = await reading.tasks.get(SESSION, task_id_for(TOOL_USE))
    assert task is not None
    assert task.delivered_bytes == 128
    # When the log is cut and written again (rotated), an alert first, then heartbeats,
    # past the old mark by the next look
    reading.output.write_bytes(b"ALERT disk full\n" + BEAT * 8)
    events = await monitor_looks(reading, 4)
    # Then the alert is delivered.
    assert any("ALERT" in e for e in events), events


async def test_a_cut_between_the_two_reads_of_one_look_loses_no_new_line(
    reading: Reading,
) -> None:
    # Given a monitor whose first 64 bytes were delivered (its tail: all 64), and a new
    # line after them, so a look reads the tail (64 bytes, the read limit) and then, in a
    # second read, what follows the mark
    reading.output.write_bytes(b"a" * 63 + b"\n")
    await monitor_looks(reading, 2)
    task = await reading.tasks.get(SESSION, task_id_for(TOOL_USE))
    assert task is not None
    assert task.delivered_bytes == 64
    with reading.output.open("ab") as output:
        output.write(b"old second line\n")
    # When the file is cut and written again, past the mark, between those two reads
    answer = reading.server.answer
    seen = [0]

    def cut_after_first_read(request: httpx.Request) -> httpx.Response:
        reply = answer(request)
        seen[0] += 1
        if seen[0] == 1:
            reading.output.write_bytes(
                b"NEW FIRST LINE\n" + b"b" * 48 + b"\n" + b"c" * 63 + b"\n" + b"new tail\n"
            )
        return reply

    reading.server.answer = cut_after_first_read  # type: ignore[method-assign]
    current = await reading.tasks.get(SESSION, task_id_for(TOOL_USE))
    assert current is not None
    await reading.watcher._monitor(HANDLE, current, RUNNING)
    del reading.server.answer
    events = await monitor_looks(reading, 4)
    # Then the new file's first line is delivered.
    assert any("NEW FIRST LINE" in e for e in events), events


async def test_a_previous_release_watcher_moving_the_mark_does_not_redeliver_the_file(
    reading: Reading,
) -> None:
    # Given a monitor whose first line was delivered by this release's watcher (its tail
    # kept)
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 1)
    task_id = task_id_for(TOOL_USE)
    # When, in a rolling deploy (0022 applied, processes of the previous release still
    # running), a watcher of the previous release delivers the next line: its key, and
    # its compare-and-set on delivered_bytes alone, moving the mark, not the tail
    with reading.output.open("ab") as output:
        output.write(b"second line\n")
    await reading.sessions.notify(
        SESSION,
        kind=NOTIFICATION_KIND,
        text="<event>second line</event>",
        source_key=f"mon:11:{TOOL_USE}",
    )
    async with reading.tasks._db.write() as conn:
        await conn.execute(
            background_tasks.update()
            .where(
                background_tasks.c.session_id == SESSION,
                background_tasks.c.task_id == task_id,
                background_tasks.c.state == "running",
                background_tasks.c.delivered_bytes == 11,
            )
            .values(delivered_bytes=23, delivered_at=datetime.now(UTC))
        )
    # and this release's watcher then looks at a third line
    with reading.output.open("ab") as output:
        output.write(b"third line\n")
    events = await monitor_looks(reading, 2)
    # Then each line is delivered once: the kept tail ends at the mark the earlier
    # release moved past, so it is not trusted, and the file is not taken for cut
    assert sum("first line" in e for e in events) == 1, events
    assert sum("second line" in e for e in events) == 1, events
    assert sum("third line" in e for e in events) == 1, events
