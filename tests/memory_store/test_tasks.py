"""``BackgroundTasks`` on both backends: registered once, looked at by one watcher at a
time, ended once, and a running one keeps its sandbox from every idle claim."""

from __future__ import annotations

import uuid

from memory_store import BackgroundTask, BackgroundTasks, Database, SandboxLedgerStore


def _task(session_id: str, task_id: str, sandbox_id: str) -> BackgroundTask:
    return BackgroundTask(
        session_id, task_id, f"toolu_{task_id}", "bash", sandbox_id, "{}", "sleep", "/w/x"
    )


async def test_a_task_is_registered_once_and_looked_at_by_one_watcher_at_a_time(
    file_db: Database,
) -> None:
    tasks, ledger = BackgroundTasks(file_db), SandboxLedgerStore(file_db)
    sandbox_id, scope = f"sbx-{uuid.uuid4().hex[:8]}", f"local:{uuid.uuid4().hex[:6]}"
    await ledger.record(sandbox_id, handle_json="{}", scope=scope, session_id="s1")
    session_id = f"s-{uuid.uuid4().hex[:8]}"

    assert await tasks.register(_task(session_id, "b1", sandbox_id))
    assert not await tasks.register(_task(session_id, "b1", sandbox_id)), "a repeat is a no-op"
    first = await tasks.due(scope=scope, recheck_s=60)
    second = await tasks.due(scope=scope, recheck_s=60)
    other_scope = await tasks.due(scope="local:elsewhere", recheck_s=0)

    assert [t.task_id for t in first] == ["b1"]
    assert second == (), "a task just taken is not handed to another watcher"
    assert other_scope == (), "a watcher takes only the tasks of sandboxes it reaches"


async def test_a_running_task_keeps_its_sandbox_from_idle_claims_until_it_ends(
    file_db: Database,
) -> None:
    tasks, ledger = BackgroundTasks(file_db), SandboxLedgerStore(file_db)
    sandbox_id, scope = f"sbx-{uuid.uuid4().hex[:8]}", f"local:{uuid.uuid4().hex[:6]}"
    await ledger.record(sandbox_id, handle_json="{}", scope=scope, session_id=None)
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    await tasks.register(_task(session_id, "b1", sandbox_id))
    await tasks.register(_task(session_id, "b2", sandbox_id))

    assert not await ledger.claim_idle(sandbox_id, idle_s=0.0, hold_s=5.0)
    assert await ledger.claim_expired(scope=scope, idle_s=0.0, hold_s=5.0, limit=10) == ()
    ended = await tasks.finish(session_id, "b1", state="completed", exit_code=0)
    again = await tasks.finish(session_id, "b1", state="failed", exit_code=1)
    killed = await tasks.kill_all(session_id)

    assert ended is not None
    assert ended.state == "completed"
    assert again is None, "a task ends once: the first to end it wins"
    assert [t.task_id for t in killed] == ["b2"]
    assert await ledger.claim_idle(sandbox_id, idle_s=0.0, hold_s=5.0)
