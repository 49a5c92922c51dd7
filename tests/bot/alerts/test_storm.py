"""An alert storm: 500 alerts of 40 problems start at most the configured sessions, one thread
per problem, and every alert is in a thread or in the storm summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bot.alerts.intake import AlertPolicy
from tests.bot.alerts.alert_support import alert_edge
from tests.bot.slack_edge import CHANNEL

ALERTS = 500
PROBLEMS = 40
MAX_OPEN = 5


def _alert(n: int) -> dict[str, object]:
    return {
        "key": f"problem-{n % PROBLEMS}",
        "title": f"Problem {n % PROBLEMS} is firing",
        "severity": "critical",
        "id": f"storm-{n}",
    }


async def test_a_storm_starts_at_most_the_cap_and_accounts_for_every_alert(
    tmp_path: Path, database_url: str | None
) -> None:
    url = database_url
    policy = AlertPolicy(max_open_per_org=MAX_OPEN, burst_window_s=30.0)
    async with alert_edge(tmp_path, database_url=url, policy=policy) as edge:
        # Given 500 alerts of 40 problems posted 10 at a time, as fast as they are acked,
        # each sent again after a 503 (the database busy), as Alertmanager re-sends
        slots = asyncio.Semaphore(10)

        async def send(n: int) -> int:
            async with slots:
                for _ in range(5):
                    code = (await edge.post("generic", _alert(n))).status_code
                    if code != 503:
                        break
                return code

        codes = await asyncio.gather(*(send(n) for n in range(ALERTS)))
        assert set(codes) == {202}
        # When every recorded alert has been taken
        await edge.settled()
        # Then at most MAX_OPEN sessions started, one thread each, and none is lost
        tally = await edge.store.tally(edge.org)
        assert tally.received == ALERTS
        assert tally.pending == 0
        assert tally.unaccounted == 0
        assert tally.in_threads == ALERTS
        assert tally.session_threads == MAX_OPEN
        started = {session_id for session_id, _ in edge.edge.enqueued.calls}
        assert len(started) == MAX_OPEN
        roots = [
            m for m in edge.edge.slack_api.state.messages.get(CHANNEL, []) if "thread_ts" not in m
        ]
        assert len(roots) == MAX_OPEN + 1  # the problems' threads and one storm summary
        summary = [r for r in roots if "Alert storm" in r["text"]]
        assert len(summary) == 1
        # and the summary, once its last update is sent, lists the 35 other problems
        await edge.edge.slack_api.wait_for(
            lambda: "35 problem(s)" in json.dumps(summary[0].get("blocks")), timeout_s=30.0
        )
