"""Pure parts: output capping, event framing, stored values and wire parsing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sandbox_client import Loss, SandboxHandle, SetupStep, StepFailure, egress_socket
from sandbox_client.events import StreamEvent, read_events
from sandbox_client.server.capture import HeadTail
from sandbox_client.server.http import unquote
from sandbox_client.wire import cap_text, parse_time


def test_head_tail_keeps_the_start_and_the_end_within_its_cap() -> None:
    buffer = HeadTail(max_bytes=10)
    for _ in range(1000):
        buffer.append(b"0123456789")
    buffer.append(b"THE-END")

    text = buffer.text()

    assert text == "01234\n[... 9997 bytes omitted ...]\nE-END"
    assert buffer.total_bytes == 10_007


def test_head_tail_returns_small_streams_untouched() -> None:
    buffer = HeadTail(max_bytes=100)
    buffer.append(b"hello ")
    buffer.append("wörld".encode())

    assert buffer.text() == "hello wörld"
    assert buffer.omitted_bytes == 0


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_events_split_across_chunks_and_oversized_lines_are_dropped() -> None:
    stream = _chunks(
        b'{"type":"stdout","da', b'ta":"a"}\n{"type":"keepalive"}\n',
        b'{"type":"stdout","data":"' + b"x" * 100, b"x" * 100 + b'"}\n',
        b'{"type":"result","data":"{}"}',
    )  # fmt: skip

    events = [event async for event in read_events(stream, max_line_bytes=64)]

    assert events == [
        StreamEvent("stdout", "a"),
        StreamEvent("keepalive"),
        StreamEvent("oversized"),
        StreamEvent("result", "{}"),
    ]


def test_a_handle_survives_a_json_round_trip_and_ignores_unknown_keys() -> None:
    handle = SandboxHandle("local", "sbx-1", "http://sandbox", socket_path="/s.sock", pid=7)

    assert SandboxHandle.from_json(handle.to_json()) == handle
    assert SandboxHandle.from_json(handle.to_json()[:-1] + ', "future": 1}') == handle
    with pytest.raises(ValueError, match="incomplete"):
        SandboxHandle.from_json('{"provider": "local"}')


def test_set_up_steps_survive_a_json_round_trip_with_binary_data() -> None:
    steps = [
        SetupStep.file("/workspace/a.bin", bytes(range(256))),
        SetupStep.run("make", timeout_s=5),
    ]

    assert [SetupStep.from_json(step.to_json()) for step in steps] == steps
    with pytest.raises(ValueError, match="invalid set-up step"):
        SetupStep.from_json('{"kind": "teleport"}')


def test_the_loss_reads_as_a_notice_for_the_model() -> None:
    loss = Loss(
        old_sandbox_id="sbx-old",
        new_sandbox_id="sbx-new",
        running_processes=("toolu_1",),
        files_not_recreated=tuple(f"/workspace/f{i}" for i in range(25)),
        workspace_known=True,
        failed_steps=(StepFailure(SetupStep.run("make"), "exit code 2"),),
        replayed_steps=3,
    )

    text = loss.describe()

    assert "replaced by a new one (sbx-new)" in text
    assert "toolu_1" in text
    assert "/workspace/f19" in text
    assert "and 5 more" in text
    assert "run `make`: exit code 2" in text


def test_times_parse_from_blaxels_rfc1123_and_from_iso_8601() -> None:
    expected = datetime(2025, 6, 1, 10, 6, tzinfo=UTC)

    assert parse_time("Sun, 01 Jun 2025 10:06:00 GMT") == expected
    assert parse_time("2025-06-01T10:06:00Z") == expected
    assert parse_time("") is None
    assert parse_time(None) is None


def test_long_text_keeps_its_head_and_tail() -> None:
    assert cap_text("a" * 10 + "b" * 10, 10) == "aaaaa\n[... 10 characters omitted ...]\nbbbbb"


def test_percent_decoding_handles_utf8_and_stray_percent_signs() -> None:
    assert unquote("/filesystem//work%20space/%C3%A9") == "/filesystem//work space/é"
    assert unquote("100%+done%2") == "100%+done%2"


def test_the_gateway_serves_a_jail_in_its_read_only_run_directory() -> None:
    # Given the server's socket of a current jail and of one made by an earlier release
    current, earlier = Path("/s/sbx-1/sbx.sock"), Path("/s/sbx-2/run/sbx.sock")

    assert egress_socket(current) == Path("/s/sbx-1/run/egress.sock")
    assert egress_socket(earlier) == Path("/s/sbx-2/run/egress.sock")
