"""A monitor's output file cut and written again, a failed last read, and a batch an earlier
release notified: no line lost, none delivered twice or in pieces (red team)."""

from __future__ import annotations

from typing import cast

from harness import NOTIFICATION_KIND
from harness.tools.background import task_id_for
from sandbox_client import SandboxHandle
from sandbox_client.records import ProcessRecord, ProcessStatus

from .test_background_watcher import SESSION, Reading, monitor_looks, reading

__all__ = ["reading"]  # the fixture, for pytest

TOOL_USE = "toolu_mon_r"  # ``monitor_looks``'s monitor
RUNNING = ProcessRecord(TOOL_USE, "cmd", ProcessStatus.RUNNING, None)
HANDLE = cast(SandboxHandle, None)


async def test_a_file_cut_and_written_past_the_mark_between_two_looks_is_followed_from_its_start(
    reading: Reading,
) -> None:
    # Given a monitor whose first 44 bytes were delivered
    reading.output.write_bytes(b"first line\n" * 4)
    await monitor_looks(reading, 1)
    # When its file is emptied and written again, and has grown past 44 bytes by the
    # next look (a monitor's batch time is 3 s: a log emptied then written fast)
    reading.output.write_bytes(b"new 1\n" + b"new line two, long enough to pass the mark\n")
    events = await monitor_looks(reading, 3)
    # Then the new file's lines are delivered from its start, whole.
    assert any("new 1" in e for e in events), events
    assert any("new line two" in e for e in events), events


async def test_a_monitor_that_ended_while_its_last_read_fails_still_delivers_its_last_lines(
    reading: Reading,
) -> None:
    # Given a monitor whose first line was delivered, then that wrote its last line and
    # exited
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 1)
    with reading.output.open("ab") as output:
        output.write(b"last line\n")
    task_id = task_id_for(TOOL_USE)
    ended = ProcessRecord(TOOL_USE, "cmd", ProcessStatus.COMPLETED, 0)
    # When the look that sees it ended finds the sandbox's server failing (500), and a
    # later look finds it well again
    reading.server.failing = True
    current = await reading.tasks.get(SESSION, task_id)
    assert current is not None
    await reading.watcher._monitor(HANDLE, current, ended)
    reading.server.failing = False
    current = await reading.tasks.get(SESSION, task_id)
    assert current is not None
    if current.running:
        await reading.watcher._monitor(HANDLE, current, ended)
    # Then its last line reaches the session (in the ending's event or another).
    events = await monitor_looks(reading, 0)
    assert any("last line" in e for e in events), events


async def test_a_stale_look_after_a_cut_and_regrowth_delivers_no_piece_twice(
    reading: Reading,
) -> None:
    # Given a monitor whose first line (11 bytes) was delivered, and a look that read
    # the row then (a racing watcher, or one slower than the recheck time)
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 1)
    task_id = task_id_for(TOOL_USE)
    stale = await reading.tasks.get(SESSION, task_id)
    assert stale is not None
    # When the file is cut and written again ("x"), seen by a fresh look, then grows
    # past 11 bytes
    reading.output.write_bytes(b"x\n")
    await monitor_looks(reading, 1)
    with reading.output.open("ab") as output:
        output.write(b"yyyyyyyyyyyy\n")
    # and the stale look and then a fresh one look at it
    await reading.watcher._monitor(HANDLE, stale, RUNNING)
    events = await monitor_looks(reading, 1)
    # Then the line "yyyyyyyyyyyy" is delivered once, whole.
    assert sum("yyy" in e for e in events) == 1, events


async def test_a_batch_notified_by_the_previous_release_is_not_delivered_again(
    reading: Reading,
) -> None:
    # Given a monitor whose first line a watcher of the previous release notified (key
    # ``mon:{delivered_bytes}:{tool_use_id}``) and then died before moving the mark (a
    # rolling deploy: that is what a redo is for)
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 0)
    await reading.sessions.notify(
        SESSION,
        kind=NOTIFICATION_KIND,
        text="<event>first line</event>",
        source_key=f"mon:0:{TOOL_USE}",
    )
    # When this release's watcher redoes the look
    events = await monitor_looks(reading, 1)
    # Then the line is not delivered twice.
    assert sum("first line" in e for e in events) == 1, events


async def test_an_ended_monitor_whose_reads_keep_failing_is_ended_after_a_bounded_few_looks(
    reading: Reading,
) -> None:
    # Given a monitor that exited, and a sandbox server that fails every read
    from bot.durable.background import FINAL_READ_TRIES

    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 0)
    task_id = task_id_for(TOOL_USE)
    ended = ProcessRecord(TOOL_USE, "cmd", ProcessStatus.COMPLETED, 0)
    reading.server.failing = True
    # When the watcher looks at it again and again
    looks = 0
    while looks < FINAL_READ_TRIES + 5:
        current = await reading.tasks.get(SESSION, task_id)
        assert current is not None
        if not current.running:
            break
        await reading.watcher._monitor(HANDLE, current, ended)
        looks += 1
    # Then it is ended after FINAL_READ_TRIES looks, its ending told to the session
    assert looks == FINAL_READ_TRIES
    events = await monitor_looks(reading, 0)
    assert any("completed" in e for e in events), events
