"""The gateway's approval check, answered from the session's committed checkpoint (§13)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.egress import approval_check
from harness import (
    ApprovalStatus,
    Checkpoint,
    Message,
    PendingApproval,
    Requester,
    ToolUseBlock,
    input_sha256,
)
from memory_store import Database, SessionKey, SessionStore

CALL = "toolu_post"
POST = {"command": "sh ./notify.sh", "description": "Notify"}  # its curl -X POST is unseen


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionStore]:
    db = Database.from_url(None, data_dir=tmp_path)
    await db.migrate()
    yield SessionStore(db)
    await db.dispose()


async def _store(sessions: SessionStore, cp: Checkpoint) -> None:
    opened = await sessions.open_or_join(
        SessionKey("T1", "C1", cp.session_id),
        requester_id="U1",
        initial_checkpoint=cp.state_json(),
        text="go",
        source_ts="1.0",
        session_id=cp.session_id,
    )
    assert opened.token is not None


def _checkpoint(session_id: str, status: ApprovalStatus, *, in_flight: str | None) -> Checkpoint:
    now = datetime.now(UTC)
    approval = PendingApproval(
        CALL,
        "Bash",
        input_sha256("Bash", POST),
        POST["command"],
        "r",
        now,
        now + timedelta(hours=1),
    )
    if status is not ApprovalStatus.PENDING:
        approval = approval.decided(status, "U2", now)
    call = Message("assistant", (ToolUseBlock(CALL, "Bash", POST),))
    cp = Checkpoint(session_id, "T1", "C1", Requester("U1"), messages=(call,))
    return replace(cp, approval=approval, in_flight=in_flight)


async def test_only_an_approved_call_in_flight_may_change_things(sessions: SessionStore) -> None:
    approved = approval_check(sessions)
    await _store(sessions, _checkpoint("running", ApprovalStatus.APPROVED, in_flight=CALL))
    await _store(sessions, _checkpoint("not-yet", ApprovalStatus.APPROVED, in_flight=None))
    await _store(sessions, _checkpoint("waiting", ApprovalStatus.PENDING, in_flight=None))
    await _store(sessions, _checkpoint("denied", ApprovalStatus.DENIED, in_flight=CALL))

    assert await approved("running", CALL)
    assert not await approved("running", "toolu_other")  # another call of the same session
    assert not await approved("not-yet", CALL)
    assert not await approved("waiting", CALL)
    assert not await approved("denied", CALL)
    assert not await approved("no-such-session", CALL)
