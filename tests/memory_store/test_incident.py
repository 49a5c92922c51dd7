"""An incident's rows on both backends: one channel's (or one thread's) sessions, their
events of the kinds the record reads, messages, egress requests and status posts, in time
order; nothing of another channel."""

from __future__ import annotations

from memory_store import (
    Continue,
    Database,
    EgressEntry,
    EgressLog,
    IncidentLog,
    NewEvent,
    Outbox,
    SessionKey,
    SessionStore,
)
from tests.memory_store.session_support import ManualClock


async def _session(
    sessions: SessionStore, clock: ManualClock, org: str, channel: str, root: str
) -> str:
    opened = await sessions.open_or_join(
        SessionKey(org, channel, root),
        requester_id="U1",
        initial_checkpoint="{}",
        text=f"help in {channel}",
        source_ts=root,
    )
    assert opened.token is not None
    clock.advance(1)
    claim = await sessions.claim(opened.session_id, opened.token, worker_id="w", lease_s=30)
    assert claim is not None
    events = [
        NewEvent("model_response", "{}"),  # not read: the step's machinery
        NewEvent("tool_result", '{"name":"Bash"}'),
    ]
    await sessions.commit(claim, checkpoint="{}", outcome=Continue(), events=events)
    return opened.session_id


async def test_an_incident_reads_its_channels_rows_in_time_order(
    file_db: Database, org: str
) -> None:
    clock = ManualClock()
    sessions = SessionStore(file_db, clock=clock)
    first = await _session(sessions, clock, org, "C1", "1.000100")
    clock.advance(1)
    await _session(sessions, clock, org, "C2", "2.000100")  # another incident
    clock.advance(1)
    await sessions.add_input(first, user_id="U2", text="check the pool", source_ts="1.000200")
    await EgressLog(file_db).record(
        EgressEntry(
            first, "toolu_1", clock(), "GET", "grafana", 443, "/api", 200, 10, 1.0, "g", "allowed"
        )
    )
    outbox = Outbox(file_db)
    await outbox.post_intent(
        first,
        f"{first}:status:1",
        channel_id="C1",
        thread_ts="1.000100",
        kind="status",
        payload_json="{}",
    )
    await outbox.post_done(f"{first}:status:1", "1.000300")

    found = await IncidentLog(file_db).rows(org, "C1")

    assert [s.id for s in found.sessions] == [first]
    assert [r.at for r in found.rows] == sorted(r.at for r in found.rows)
    shape = {(r.source, r.kind, r.text) for r in found.rows}
    assert shape == {
        ("input", "user", "help in C1"),
        ("event", "tool_result", '{"name":"Bash"}'),
        ("input", "user", "check the pool"),
        ("egress", "allowed", "GET grafana/api"),
        ("status", "status", f"{first}:status:1"),
    }
    (reply,) = [r for r in found.rows if r.text == "check the pool"]
    assert (reply.extra, reply.ref) == ("U2", "1.000200")
    (status,) = [r for r in found.rows if r.source == "status"]
    assert status.ref == "1.000300"
    assert all(r.at.tzinfo is not None for r in found.rows)
    assert (await IncidentLog(file_db).rows(org, "C1", thread_ts="9.9")).rows == ()
