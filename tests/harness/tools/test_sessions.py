"""Two sessions on one shared memory file, through the tools, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_store import Namespace, Origin, Scope
from tests.harness.tool_support import (
    STATE_CURRENT,
    JailWorkspace,
    SessionDriver,
    error_text,
    open_store,
)

RUNBOOK = "# Checkout runbook\nowner: payments\npool: 10\ncache: redis\ntimeout: 5s\n"
MODIFIED = (
    "File has been modified since read, either by the user or by a linter. "
    "Read it again before attempting to write it."
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """None (SQLite in tmp_path) or the test run's PostgreSQL database."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def pair(
    store_url: str | None, tmp_path: Path
) -> AsyncIterator[tuple[SessionDriver, SessionDriver]]:
    url = store_url
    org = f"T-{uuid.uuid4().hex[:8]}"  # the Postgres database is shared by the test run
    async with open_store(url, tmp_path) as store:
        await store.write(
            Namespace(org, Scope.MEMORY), "/runbook.md", RUNBOOK, Origin("U1"), expected_version=0
        )
        workspace = JailWorkspace(tmp_path)
        yield (
            SessionDriver(store, workspace, org_id=org, session_id="s-alpha"),
            SessionDriver(store, workspace, org_id=org, session_id="s-beta"),
        )


async def read(session: SessionDriver) -> str:
    return (await session.call("Read", {"file_path": "/memory/runbook.md"})).content


async def edit(session: SessionDriver, old: str, new: str) -> str:
    outcome = await session.call(
        "Edit", {"file_path": "/memory/runbook.md", "old_string": old, "new_string": new}
    )
    assert not outcome.is_error, outcome.content
    return outcome.content


async def test_disjoint_edits_from_two_sessions_both_land(
    pair: tuple[SessionDriver, SessionDriver],
) -> None:
    alpha, beta = pair
    # Given both sessions read the runbook
    await read(alpha)
    await read(beta)
    # When each edits a different line
    alpha_says = await edit(alpha, "pool: 10", "pool: 50")
    beta_says = await edit(beta, "timeout: 5s", "timeout: 2s")
    # Then both changes are in the file, and the second editor was told about the first
    current = await read(alpha)
    assert "pool: 50" in current
    assert "timeout: 2s" in current
    assert "another session changed this file" not in alpha_says
    assert "Another session changed this file after you read it" in beta_says
    assert "-     3\tpool: 10\n+     3\tpool: 50" in beta_says


async def test_a_stale_write_is_refused_and_the_change_notice_reaches_the_writer_once(
    pair: tuple[SessionDriver, SessionDriver],
) -> None:
    alpha, beta = pair
    # Given both read the runbook, and beta then changed a line
    await read(alpha)
    await read(beta)
    await edit(beta, "cache: redis", "cache: memcached")
    # When alpha overwrites the whole file from its stale copy
    refused = await alpha.call(
        "Write", {"file_path": "/memory/runbook.md", "content": RUNBOOK + "note: alpha\n"}
    )
    # Then the write is refused with Claude Code's sentence and who changed it
    assert error_text(refused) == (
        f"{MODIFIED} It is now at version 2, last changed by another agent session (s-beta)."
    )
    # And at alpha's next step the change notice (with the diff) arrives exactly once
    first = await alpha.next_step_notices()
    second = await alpha.next_step_notices()
    assert len(first) == 1
    assert "/memory/runbook.md was changed by another agent session (s-beta)" in first[0]
    assert "\n4\tcache: memcached" in first[0]
    assert second == []
    # And beta, which made the change, is not told about its own edit
    assert await beta.next_step_notices() == []
    # And after reading again alpha's write goes through, keeping nothing stale
    await read(alpha)
    accepted = await alpha.call(
        "Write",
        {"file_path": "/memory/runbook.md", "content": await current_content(alpha) + "x: 1\n"},
    )
    assert (
        accepted.content
        == "The file /memory/runbook.md has been updated successfully." + STATE_CURRENT
    )


async def current_content(session: SessionDriver) -> str:
    ns = Namespace(session.org_id, Scope.MEMORY)
    return (await session.store.read(ns, "/runbook.md")).content


async def test_a_compacted_away_file_must_be_read_again_before_it_is_overwritten(
    pair: tuple[SessionDriver, SessionDriver],
) -> None:
    alpha, _ = pair
    await read(alpha)
    # When compaction drops the read-state entirely, or keeps it as partial reads
    alpha.read_state.clear()
    cleared = await alpha.call("Write", {"file_path": "/memory/runbook.md", "content": "x\n"})
    await read(alpha)
    alpha.compact()
    compacted = await alpha.call("Write", {"file_path": "/memory/runbook.md", "content": "x\n"})
    # Then Write refuses until the file is read again
    assert error_text(cleared) == "File has not been read yet. Read it first before writing to it."
    assert error_text(compacted).startswith(
        "File has not been read since the conversation was compacted"
    )
    await read(alpha)
    assert not (
        await alpha.call("Write", {"file_path": "/memory/runbook.md", "content": "x\n"})
    ).is_error
