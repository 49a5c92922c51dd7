"""The seeded incident: who is in the channel, what they say, and what the agent finds.

``checkout-api`` returns HTTP 500s since a deploy at 14:02 lowered its database pool
from 20 to 5 connections. The sandbox's ``/workspace`` holds the evidence (the
service's log, its DB config, the deploy log, the database's own log, and three
slow "metrics" scripts that sample for ``SAMPLE_S`` seconds, as a metrics API
would); ``/skills`` holds a playbook for it and ``/memory`` one older note. Where
Prometheus is installed, a real one holds the same requests as counters
(``prometheus_history``), reached only through the egress gateway.

Everything here is data: ``write_workspace`` and ``write_skills`` lay the files out
on disk (the workspace seed, a skill folder to import), ``seed_memory`` writes the
memory note into the store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.drill.channel import Person as Person  # the people of the scenario are channel people
from harness import parse_summary
from memory_store import FileStore, Namespace, Origin, RecallStore, Scope

CHANNEL = "C-INC"
SAMPLE_S = 1.5
SKILL_NAME = "db-pool-exhaustion"
SKILL_PATH = f"/skills/{SKILL_NAME}/SKILL.md"
FINDINGS_PATH = "/incident/findings.md"
DB_NOTE_PATH = "/incident/db-side.md"
MEMORY_PATH = "/memory/checkout-api.md"
SEEDED_MEMORY_PATH = "/memory/teams.md"

SERVICE_LOG = "/workspace/logs/checkout-api.log"
DB_CONFIG = "/workspace/config/db.yaml"
DEPLOY_LOG = "/workspace/deploy/deploy.log"
DB_LOG = "/workspace/logs/orders-db.log"

COUNT_500S = f"grep -c ' 500 ' {SERVICE_LOG}"
SHOW_DEPLOYS = f"cat {DEPLOY_LOG}"
SAMPLE_POOL = "sh /workspace/bin/pool-stats checkout-api"
SHOW_DB_CONFIG = f"cat {DB_CONFIG}"
SAMPLE_ERRORS = "sh /workspace/bin/error-rate checkout-api"
TAIL_DB_LOG = f"tail -n 3 {DB_LOG}"
SAMPLE_DB = "sh /workspace/bin/db-connections orders-db"
ROLLBACK = (
    "chmod +x /workspace/bin/kubectl && "
    "/workspace/bin/kubectl rollout undo deployment/checkout-api"
)  # a change: the approval policy asks a human first (§13)
ROLLBACK_LINE = "deployment.apps/checkout-api rolled back"
ROLLBACKS_LOG = "/workspace/rollbacks.log"
COUNT_ROLLBACKS = f"cat {ROLLBACKS_LOG} 2>/dev/null | wc -l"
PROMETHEUS = "prometheus"  # the egress rule's name, as the system prompt lists it
PROM_SERIES = 'http_requests_total{service="checkout-api",code="500"}'
PROM_START = "2026-11-30T13:55:00Z"
PROM_END = "2026-11-30T14:10:00Z"
PROM_STEP = "15s"


ALICE = Person(
    "U0ALICE",
    "alice",
    "checkout-api is returning 500s since 14:02, look at the logs and the last deploy",
)
BOB = Person(
    "U0BOB",
    "bob",
    "I'll take the database side of the checkout-api 500s: is orders-db itself healthy?",
)
CAROL = Person("U0CAROL", "carol", "also check the DB pool size")
DAVE = Person(
    "U0DAVE", "dave", "new incident, checkout-api again: what do we know about it from before?"
)
ERIN = Person("U0ERIN", "erin", "watch on")  # makes the channel an alert channel (issue #27)
FRANK = Person("U0FRANK", "frank", "postmortem")  # the word alone asks for the draft (§15)
PEOPLE = (ALICE, BOB, CAROL, DAVE, FRANK)

SKILL_MD = f"""\
---
name: {SKILL_NAME}
description: Diagnose HTTP 500s caused by an exhausted database connection pool (requests \
time out waiting for a connection), typically right after a deploy changed the pool settings. \
Use when a service returns 500s with "timeout acquiring connection" errors.
---
# Database connection-pool exhaustion

1. Count the failing requests and find when they started:
   `grep -c ' 500 ' /workspace/logs/<service>.log`.
2. Check the last deploys (`/workspace/deploy/deploy.log`): did one touch the DB settings?
3. Sample the pool: `sh /workspace/bin/pool-stats <service>` (it samples for a moment).
   `in_use == size` with requests waiting means the pool is exhausted.
4. Write what you found to `/incident/findings.md` as you go.
5. Confirm it is still happening: `sh /workspace/bin/error-rate <service>`.
6. Recommend: roll the deploy back, or raise `pool_size` in `config/db.yaml`.
   Record the lesson in `/memory/<service>.md`.
"""

PAST_CHANNEL = "C-PAST"
PAST_AT = datetime(2026, 10, 12, 9, 30, tzinfo=UTC)
PAST_DIR = f"/incidents/{PAST_AT:%Y-%m-%d}-{PAST_CHANNEL}/"
PAST_SUMMARY_PATH = f"{PAST_DIR}summary.md"
PAST_FIX = "rolled back v2.9.1, which had set pool_size to 4; then pinned pool_size in review"
PAST_SUMMARY = f"""\
# checkout-api 500s after a deploy lowered the DB pool size

- Services: checkout-api, orders-db
- Symptoms: HTTP 500s, "timeout acquiring connection from pool", requests waiting
- Root cause: the v2.9.1 deploy set pool_size to 4 in config/db.yaml
- Fix: {PAST_FIX}
- Links: /incident/postmortem.md
"""
PAST_NOTES = """\
# checkout-api 500s (12 October)

- 500s from 09:12 UTC, right after the v2.9.1 deploy
- bin/pool-stats: size=4 in_use=4 waiting=22
"""

SEEDED_MEMORY = """\
checkout-api is owned by team payments (#payments-oncall); it deploys from the release branch.
orders-db is the shared PostgreSQL primary behind checkout-api and orders-api.
"""

DB_YAML = """\
# checkout-api database settings (changed by deploy v2.14.0 at 14:02)
database:
  host: orders-db.internal
  pool_size: 5          # was 20 before v2.14.0
  pool_timeout_s: 5
  max_overflow: 0
"""

DEPLOY_LOG_TEXT = """\
2026-11-30T11:20:04Z checkout-api v2.13.2 deployed by deploy-bot (release branch), 6/6 pods
2026-11-30T14:01:58Z checkout-api v2.14.0 deploy started by erin: "tune DB settings for replica"
2026-11-30T14:02:00Z checkout-api v2.14.0 changed config/db.yaml: pool_size 20 -> 5
2026-11-30T14:02:06Z checkout-api v2.14.0 rollout complete, 6/6 pods
"""

DB_LOG_TEXT = """\
2026-11-30 14:05:00 UTC LOG:  connections: 31 of 500 in use (checkout-api 30, orders-api 1)
2026-11-30 14:10:00 UTC LOG:  connections: 31 of 500 in use (checkout-api 30, orders-api 1)
2026-11-30 14:15:00 UTC LOG:  checkpoint complete; no errors in the last 15 min
"""


def _sampler(line: str) -> str:
    """A script that samples for ``SAMPLE_S`` seconds, as a metrics API would, then prints."""
    return f'#!/bin/sh\n# samples for a moment\nsleep {SAMPLE_S:g}\necho "{line}"\n'


POOL_STATS_LINE = "pool checkout-api: size=5 in_use=5 waiting=37 acquire_timeouts_last_5m=312"
ERROR_RATE_LINE = "checkout-api: 64% of requests failing with HTTP 500 over the last 60 s"
DB_CONNECTIONS_LINE = "orders-db: 31 of 500 connections in use, 0 waiting, no errors in 15 min"


LOG_START = datetime(2026, 11, 30, 13, 55, tzinfo=UTC)
DEPLOY_AT = datetime(2026, 11, 30, 14, 2, tzinfo=UTC)
LOG_REQUESTS = 180
LOG_EVERY_S = 5


def requests() -> list[tuple[datetime, bool]]:
    """checkout-api's requests, 13:55 to 14:10: ``(time, failed)``, one every 5 s; all fine
    before the 14:02 deploy, then two of every three failing for want of a pool connection."""
    found = []
    for n in range(LOG_REQUESTS):
        at = LOG_START + timedelta(seconds=n * LOG_EVERY_S)
        found.append((at, at >= DEPLOY_AT and n % 3 != 0))
    return found


def service_log() -> str:
    """The checkout-api access log of ``requests``."""
    lines = []
    for n, (at, failed) in enumerate(requests()):
        stamp = f"{at:%Y-%m-%dT%H:%M:%SZ}"
        if failed:
            lines.append(
                f"{stamp} ERROR POST /api/checkout 500 5004ms "
                "db: timeout acquiring connection from pool"
            )
        else:
            lines.append(f"{stamp} INFO  POST /api/checkout 200 {38 + n % 17}ms")
    return "\n".join(lines) + "\n"


def prometheus_history() -> str:
    """The same requests as Prometheus counted them: ``http_requests_total`` by status code,
    a sample every 5 s, in OpenMetrics text (for ``promtool``'s backfill)."""
    lines = [
        "# HELP http_requests checkout-api's HTTP requests, by status code.",
        "# TYPE http_requests counter",
    ]
    for code, failing in (("200", False), ("500", True)):
        count = 0
        for at, failed in requests():
            count += failed == failing
            labels = f'code="{code}",service="checkout-api"'
            lines.append(f"http_requests_total{{{labels}}} {count} {int(at.timestamp())}")
    return "\n".join([*lines, "# EOF"]) + "\n"


def prometheus_query(base_url: str) -> str:
    """The Bash command querying checkout-api's 500 counter over the incident's minutes."""
    return (
        f"curl -sS -G {base_url}/api/v1/query_range --data-urlencode 'query={PROM_SERIES}' "
        f"-d start={PROM_START} -d end={PROM_END} -d step={PROM_STEP}"
    )


def expected_500s() -> int:
    """How many lines of the service log ``COUNT_500S`` matches."""
    return sum(" 500 " in line for line in service_log().splitlines())


def workspace_files() -> dict[str, str]:
    """The workspace seed: relative path → content."""
    return {
        "logs/checkout-api.log": service_log(),
        "logs/orders-db.log": DB_LOG_TEXT,
        "config/db.yaml": DB_YAML,
        "deploy/deploy.log": DEPLOY_LOG_TEXT,
        "bin/pool-stats": _sampler(POOL_STATS_LINE),
        "bin/error-rate": _sampler(ERROR_RATE_LINE),
        "bin/db-connections": _sampler(DB_CONNECTIONS_LINE),
        "bin/kubectl": f'#!/bin/sh\necho "$*" >> {ROLLBACKS_LOG}\necho "{ROLLBACK_LINE}"\n',
    }


def write_workspace(directory: Path) -> Path:
    """Lay the workspace seed out under ``directory`` (for ``WARROOM_WORKSPACE_SEED``)."""
    for relative, content in workspace_files().items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return directory


def write_skills(directory: Path) -> Path:
    """Write the playbook as a Claude Code skill folder under ``directory``."""
    folder = directory / SKILL_NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    return directory


async def seed_past_incident(store: FileStore, recall: RecallStore, org_id: str) -> None:
    """Write last month's incident of another channel (its summary and notes) and record
    it, dated, as a past incident the org's sessions can find (idempotent).

    Raises:
        memory_store.StoreError: the store refused or could not be reached.
    """
    ns = Namespace(org_id, Scope.INCIDENT, PAST_CHANNEL)
    summary = await store.write(
        ns, "/summary.md", PAST_SUMMARY, Origin("drill"), expected_version=None
    )
    await store.write(ns, "/findings.md", PAST_NOTES, Origin("drill"), expected_version=None)
    await recall.record(
        org_id,
        PAST_CHANNEL,
        parse_summary(PAST_SUMMARY),
        summary_version=summary.version,
        started_at=PAST_AT,
    )


async def seed_memory(store: FileStore, org_id: str) -> None:
    """Write the org's older memory note (idempotent).

    Raises:
        memory_store.StoreError: the store refused or could not be reached.
    """
    ns = Namespace(org_id, Scope.MEMORY)
    path = SEEDED_MEMORY_PATH.removeprefix("/memory")
    await store.write(ns, path, SEEDED_MEMORY, Origin("drill"), expected_version=None)
