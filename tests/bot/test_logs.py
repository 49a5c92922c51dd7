"""Log lines carry the session, org and channel they are about."""

from __future__ import annotations

import asyncio
import doctest
import io
import logging
import threading
from collections.abc import Iterator

import pytest

from bot import logs
from bot.logs import log_context, setup_logging


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The text ``setup_logging`` writes, with the root logger restored afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    stream = io.StringIO()
    setup_logging("INFO", stream=stream)
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_every_line_ends_with_session_org_and_channel(captured: io.StringIO) -> None:
    with log_context(session_id="s-42", org_id="T0ORG", channel_id="C0INC"):
        logging.getLogger("bot.test_logs").info("step committed")

    line = captured.getvalue().strip()
    assert "step committed" in line
    assert line.endswith("session=s-42 org=T0ORG channel=C0INC")


def test_lines_outside_a_session_say_dash(captured: io.StringIO) -> None:
    logging.getLogger("bot.test_logs").warning("sweeper started")

    assert captured.getvalue().strip().endswith("session=- org=- channel=-")


def test_inner_context_keeps_outer_ids_it_does_not_set(captured: io.StringIO) -> None:
    with (
        log_context(session_id="s-1"),
        log_context(org_id="T1", channel_id="C1"),
    ):
        logging.getLogger("x").info("claimed")
    logging.getLogger("x").info("after")

    first, second = captured.getvalue().strip().splitlines()
    assert first.endswith("session=s-1 org=T1 channel=C1")
    assert second.endswith("session=- org=- channel=-")


async def test_concurrent_steps_keep_their_own_ids(captured: io.StringIO) -> None:
    # Given two steps interleaving on one event loop
    both_started = asyncio.Barrier(2)

    async def step(session_id: str) -> None:
        with log_context(session_id=session_id, org_id="T1", channel_id=f"C-{session_id}"):
            await both_started.wait()
            logging.getLogger("driver").info("done %s", session_id)

    # When both log after the other has entered its context
    await asyncio.gather(step("a"), step("b"))

    # Then each line names its own session
    lines = captured.getvalue().strip().splitlines()
    assert {line.split("done ")[1].split()[0]: line.split("session=")[1] for line in lines} == {
        "a": "a org=T1 channel=C-a",
        "b": "b org=T1 channel=C-b",
    }


def test_another_thread_does_not_see_the_context(captured: io.StringIO) -> None:
    with log_context(session_id="s-main"):
        worker = threading.Thread(target=lambda: logging.getLogger("t").info("from thread"))
        worker.start()
        worker.join()

    assert captured.getvalue().strip().endswith("session=- org=- channel=-")


def test_setup_logging_twice_installs_one_handler(captured: io.StringIO) -> None:
    stream = io.StringIO()
    setup_logging("INFO", stream=stream)
    logging.getLogger("x").info("once")

    assert stream.getvalue().count("once") == 1
    assert captured.getvalue() == ""


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(logs)

    assert result.attempted > 0
    assert result.failed == 0
