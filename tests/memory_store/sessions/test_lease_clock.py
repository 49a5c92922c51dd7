"""Leases are judged by the database's clock, not by the host's (issue #19, item 17).

Two workers share one PostgreSQL database; one runs on a host whose clock is skewed
(an injected store clock). Neither its claims nor its sweeps may act on another
worker's lease by its own clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from memory_store import Database, SessionStore, utc_now
from tests.memory_store.session_support import open_session

pytestmark = pytest.mark.postgres

SKEW_S = 6.0


def skewed(seconds: float) -> Callable[[], datetime]:
    """A host clock ``seconds`` off the true time."""
    return lambda: utc_now() + timedelta(seconds=seconds)


async def test_a_worker_whose_clock_runs_ahead_does_not_take_over_a_live_step(
    pg_db: Database,
) -> None:
    # Given a step claimed for 5 s by a worker with a true clock
    honest, ahead = SessionStore(pg_db), SessionStore(pg_db, clock=skewed(SKEW_S))
    session_id, token = await open_session(honest)
    assert await honest.claim(session_id, token, worker_id="honest", lease_s=5.0) is not None

    # When a worker whose host clock runs 6 s ahead gets the same wake-up, and sweeps
    taken = await ahead.claim(session_id, token, worker_id="ahead", lease_s=5.0)
    swept = await ahead.sweep(max_crashes=1, stale_after_s=30.0)

    # Then the live step stays with its holder
    assert taken is None
    assert session_id not in swept.failed
    assert session_id not in {w.session_id for w in swept.requeue}
    session = await honest.get(session_id)
    assert session is not None
    assert session.lease_owner == "honest"


async def test_a_worker_whose_clock_runs_behind_takes_over_an_expired_lease_at_once(
    pg_db: Database,
) -> None:
    # Given a step whose holder died with a lease of a fraction of a second
    honest, behind = SessionStore(pg_db), SessionStore(pg_db, clock=skewed(-SKEW_S))
    session_id, token = await open_session(honest)
    first = await honest.claim(session_id, token, worker_id="dead", lease_s=0.2)
    assert first is not None
    lease_until = first.lease_until

    # When a worker whose host clock runs 6 s behind tries until the database's clock
    # has passed the lease (bounded well below the skew)
    async def took() -> bool:
        claim = await behind.claim(session_id, token, worker_id="behind", lease_s=5.0)
        return claim is not None

    deadline = utc_now() + timedelta(seconds=3.0)
    while not await took():
        assert utc_now() < deadline, "the lease was judged by the skewed host clock"

    # Then it took the step over, and the lease it holds is set by the database's clock
    session = await behind.get(session_id)
    assert session is not None
    assert session.lease_owner == "behind"
    assert session.lease_until is not None
    assert session.lease_until > lease_until


async def _enqueued_lag_s(db: Database, session_id: str) -> float:
    """How far the session's last send time is from the database's clock, in seconds."""
    async with db.driver() as conn:
        lag = await conn.fetchval(
            "SELECT extract(epoch FROM now() - enqueued_at) FROM sessions WHERE id = $1",
            session_id,
        )
    return float(lag)


@pytest.mark.parametrize("skew_s", [SKEW_S, -SKEW_S], ids=["ahead", "behind"])
async def test_a_wake_up_is_sent_at_the_databases_time_whatever_the_hosts_clock(
    pg_db: Database, skew_s: float
) -> None:
    # Given a Slack edge whose host clock is 6 s off
    edge = SessionStore(pg_db, clock=skewed(skew_s))
    # When it opens a session, and later wakes it with a reply once its step is over
    session_id, _token = await open_session(edge)
    opened_lag_s = await _enqueued_lag_s(pg_db, session_id)
    async with pg_db.driver() as conn:  # the step ended: nothing pending
        await conn.execute(
            "UPDATE sessions SET pending_token = NULL, enqueued_at = NULL WHERE id = $1",
            session_id,
        )
    woke = await edge.add_input(session_id, user_id="U2", text="and now?", source_ts="2.2")
    # Then each wake-up's send time is the database's (the sweeps judge it by that clock)
    assert woke is not None
    assert abs(opened_lag_s) < 2.0
    assert abs(await _enqueued_lag_s(pg_db, session_id)) < 2.0
