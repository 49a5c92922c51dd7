"""Benchmark of related past incidents at session start (issue 29), on PostgreSQL and SQLite.

Records 10,000 synthetic past incidents in one org (a service out of 1,000, a symptom out of
40 kinds, a cause and its fix out of 30; each summary as drafted from the alert that started
it), then starts 200 sessions, each an alert repeating an earlier incident with other wording:
the symptom said another way (each kind has several phrasings; the alert never uses the past
incident's), Alertmanager's label syntax, and noise (a severity, an instance). Each start runs
``Recall.at_start`` as a session does: build the query, search, keep what was given.

A repeat fires the same alert rule (``alertname``) as the earlier incident did, as real
repeats do; each is also asked as a person would, without labels (the service by name, the
symptom in other words), to show what prose alone finds.

Prints one JSON line:
    recall_at_3             share of the 200 alerts whose earlier incident is among the top 3
                            (goal ≥ 0.9; the worse of the two backends)
    recall_at_3_mention     the same for the 200 mentions without labels (no goal)
    lookup_p50_ms / _p99_ms the search at a session's start (the query made from the alert,
                            the database's candidates, their scores), the slower backend's
                            (goal: p50 ≤ 20)
    at_start_p50_ms / _p99_ms  the whole start hook: the search, then the write that keeps
                            what was given (for ``/agent related``; a commit, so the disk's)
    first_message_bytes     the largest first-message context of the 200 (an org of 30 skills,
                            200 memory files and 6 notes), with the related incidents
    first_message_bytes_before  the same context today (no related incidents)
    first_message_added_bytes   the most the related incidents added (goal ≤ 2048)
    postgres, sqlite        each backend's figures

    .venv/bin/python bench/recall.py [--incidents 10000] [--repeats 200] [--pg-admin-url URL]

PostgreSQL is skipped (its figures null, the goals then unmet) when the admin URL cannot be
reached; it creates a throwaway database there and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# Scripts here are named like the packages they measure: drop this folder from the path, and
# put the repository root first, so imports find the real packages.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # last, for bench/goals.py alone

import asyncpg  # noqa: E402
from goals import verdict  # noqa: E402

from harness import Recall  # noqa: E402
from harness.loop.prompt import FrozenContext, frozen_context  # noqa: E402
from harness.recall.query import recall_query  # noqa: E402
from memory_store import Database, IncidentSummary, IndexEntry, RecallStore  # noqa: E402

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ORG = "T0BENCH"
SEED = 29

_FIRST = [
    "checkout",
    "payments",
    "orders",
    "cart",
    "search",
    "catalog",
    "pricing",
    "inventory",
    "shipping",
    "billing",
    "auth",
    "identity",
    "profile",
    "session",
    "ledger",
    "invoice",
    "refund",
    "coupon",
    "review",
    "rating",
    "media",
    "upload",
    "notify",
    "email",
    "sms",
    "push",
    "feed",
    "report",
    "export",
    "import",
    "gateway",
    "router",
    "scheduler",
    "batch",
    "stream",
    "indexer",
    "cache",
    "quota",
    "audit",
    "geo",
]
_SECOND = [
    "api",
    "worker",
    "db",
    "service",
    "consumer",
    "proxy",
    "cron",
    "web",
    "grpc",
    "sync",
    "writer",
    "reader",
    "queue",
    "store",
    "frontend",
    "backend",
    "engine",
    "loader",
    "relay",
    "bridge",
    "agent",
    "daemon",
    "job",
]
SERVICES = [f"{a}-{b}" for a in _FIRST for b in _SECOND][:1000]

SYMPTOMS: list[tuple[str, ...]] = [
    ("HTTP 500 errors, DB connection pool exhausted", "no free database connections in the pool",
     "500s: timeout acquiring connection from pool"),
    ("pods OOMKilled and restarting", "out of memory kills, container restarts",
     "memory limit reached, OOM killer"),
    ("p99 latency spike on requests", "responses very slow, latency above SLO",
     "slow requests, p99 latency over 2s"),
    ("disk full, no space left on device", "volume out of disk space", "filesystem 100% used"),
    ("TLS certificate expired", "x509 certificate has expired errors", "cert expiry broke TLS"),
    ("Kafka consumer lag growing", "consumer group lag keeps rising", "backlog in consumer lag"),
    ("DNS resolution failures", "NXDOMAIN and DNS lookup timeouts", "cannot resolve hostnames"),
    ("crashloop after deploy", "CrashLoopBackOff since the rollout", "pods crash looping"),
    ("rate limited by upstream, 429s", "too many requests 429 from provider",
     "upstream throttling with 429"),
    ("Redis evictions and cache misses", "cache hit ratio dropped, evictions",
     "Redis memory full evicting keys"),
    ("deadlocks in the database", "transactions deadlock detected", "SQL deadlock errors"),
    ("queue messages stuck", "messages not consumed, queue depth high", "stuck queue backlog"),
    ("CPU throttling", "CPU throttled at limit", "high CPU throttling, cfs quota"),
    ("replication lag on the replica", "read replica lagging behind primary",
     "replica lag minutes behind"),
    ("authentication failures, 401s", "login failing with 401 unauthorized",
     "token validation errors, 401"),
    ("cron job did not run", "scheduled job missed its run", "nightly cron skipped"),
    ("connection resets from load balancer", "ECONNRESET behind the LB",
     "load balancer resets connections"),
    ("health checks failing, pods unready", "readiness probe failures",
     "unready pods, failed health checks"),
    ("file descriptor exhaustion, too many open files", "EMFILE too many open files",
     "open files limit hit"),
    ("thread pool saturated", "all worker threads busy, requests queued",
     "thread pool exhaustion"),
    ("garbage collection pauses", "long GC pauses stop the world", "JVM GC pause spikes"),
    ("webhook deliveries failing", "outgoing webhooks erroring", "webhook delivery errors"),
    ("S3 access denied", "AccessDenied from object storage", "bucket permission errors"),
    ("clock skew between nodes", "NTP drift, time skew", "node clocks out of sync"),
    ("split brain in the cluster", "two leaders elected", "leader election conflict"),
    ("search index out of date", "stale search results, indexing lag",
     "reindex backlog, stale index"),
    ("emails not delivered", "outbound email bouncing", "SMTP send failures"),
    ("payment provider timeouts", "card processor timing out", "PSP timeout errors"),
    ("feature flag misconfigured", "flag rollout broke requests", "wrong feature flag value"),
    ("config map missing key", "missing configuration value at startup",
     "config key not found"),
    ("database migration locked table", "migration holding table lock",
     "ALTER TABLE lock blocking queries"),
    ("HPA not scaling", "autoscaler stuck at min replicas", "horizontal autoscaling failed"),
    ("image pull backoff", "ErrImagePull from registry", "cannot pull container image"),
    ("node not ready", "kubelet node NotReady", "worker node went NotReady"),
    ("websocket disconnects", "clients dropping websocket connections",
     "frequent websocket reconnects"),
    ("duplicate events processed", "messages processed twice", "double processing of events"),
    ("slow queries on primary", "sequential scans slowing the database",
     "missing index slow query"),
    ("CDN serving stale assets", "old static files from the CDN", "cache invalidation missed"),
    ("secrets rotation broke auth", "rotated credentials not picked up",
     "stale secret after rotation"),
    ("network partition between zones", "cross-AZ packet loss", "zone connectivity loss"),
]  # fmt: skip
CAUSES = [
    ("a deploy lowered pool_size", "rolled back the deploy and restored pool_size"),
    ("a memory leak in the new release", "rolled back and raised the memory limit"),
    ("a missing index after a schema change", "added the index concurrently"),
    ("log rotation was disabled", "re-enabled logrotate and cleared old files"),
    ("cert-manager renewal failed", "renewed the certificate by hand and fixed the issuer"),
    ("a slow consumer release", "scaled the consumers and reverted the release"),
    ("a CoreDNS config change", "reverted the CoreDNS config"),
    ("a bad environment variable in the rollout", "fixed the variable and redeployed"),
    ("a traffic spike from a partner", "asked the partner to back off and added a rate limit"),
    ("the cache was undersized", "doubled the cache memory"),
    ("two jobs updating the same rows", "serialised the jobs"),
    ("a poison message", "moved the message to the dead-letter queue"),
    ("CPU limits too low", "raised the CPU limit"),
    ("a long-running transaction on the primary", "killed the transaction"),
    ("an expired signing key", "rotated the signing key"),
    ("the scheduler pod was evicted", "pinned the scheduler with a priority class"),
    ("an idle timeout mismatch with the LB", "aligned the keep-alive timeouts"),
    ("a dependency outage", "failed over to the secondary"),
    ("a ulimit too low in the base image", "raised the nofile ulimit"),
    ("blocking calls on the event loop", "moved the calls to a thread pool"),
    ("a heap too small for the new load", "tuned the heap and GC settings"),
    ("the receiving endpoint changed", "updated the webhook URL"),
    ("an IAM policy change", "restored the IAM policy"),
    ("NTP daemon stopped", "restarted chrony and alerted on drift"),
    ("a network flap during election", "restarted the minority members"),
    ("the indexer crashed silently", "restarted the indexer and added an alert"),
    ("the SMTP relay credentials expired", "renewed the relay credentials"),
    ("the PSP had an incident", "enabled the fallback provider"),
    ("a flag defaulted to on", "turned the flag off"),
    ("a config key renamed in the chart", "restored the key name"),
]
NOISE = ("severity=critical", "severity=page", "instance=10.0.3.17:9090", "env=prod", "")


def rule_of(kind: int) -> str:
    """The alert rule that fires for symptom ``kind`` (Alertmanager's ``alertname``): a
    repeat fires the same rule, whatever words people use around it."""
    return "".join(w.capitalize() for w in SYMPTOMS[kind][0].split()[:3] if w.isalpha())


def synthetic(
    incidents: int, rng: random.Random
) -> list[tuple[str, IncidentSummary, datetime, int]]:
    """(channel, summary, start, symptom kind) of each past incident; the summary uses the
    kind's first phrasing."""
    start = datetime(2026, 11, 30, tzinfo=UTC)
    made = []
    for i in range(incidents):
        service = rng.choice(SERVICES)
        kind = rng.randrange(len(SYMPTOMS))
        cause, fix = rng.choice(CAUSES)
        phrase = SYMPTOMS[kind][0]
        summary = IncidentSummary(  # as drafted from the alert that started it
            title=f"{service}: {phrase}",
            services=(service,),
            symptoms=f"[FIRING:1] {rule_of(kind)} service={service}: {phrase}",
            root_cause=cause,
            fix=fix,
        )
        made.append((f"C{i:05d}", summary, start - timedelta(hours=i), kind))
    return made


def alert(service: str, kind: int, rng: random.Random) -> str:
    """A new alert for ``service`` and symptom ``kind``: the same rule, its description in
    other words than the past incident's, and noise labels."""
    phrase = rng.choice(SYMPTOMS[kind][1:])
    noise = rng.choice(NOISE)
    return f"[FIRING:1] {rule_of(kind)} service={service} {noise}\n{phrase}".strip()


def mention(service: str, kind: int, rng: random.Random) -> str:
    """A person's mention of a repeat, no labels: the service by name, the symptom in other
    words than the past incident's."""
    return f"<@U0BOT> {service} again? {rng.choice(SYMPTOMS[kind][1:])}"


def context_org() -> tuple[list[IndexEntry], list[IndexEntry], list[IndexEntry]]:
    """A mid-size org's indexes for the first message: skills, memory, notes."""
    at = datetime(2026, 12, 1, tzinfo=UTC)
    skills = [
        IndexEntry(f"/runbook-{i}/SKILL.md", f"Runbook {i}: steps.", 1, at) for i in range(30)
    ]
    memory = [IndexEntry(f"/svc/{s}.md", f"How {s} behaves.", 1, at) for s in SERVICES[:200]]
    notes = [IndexEntry(f"/note-{i}.md", f"Finding {i}", 1, at) for i in range(6)]
    return skills, memory, notes


async def measure(url: str | None, data_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One backend's figures."""
    rng = random.Random(SEED)
    made = synthetic(args.incidents, rng)
    db = Database.from_url(url, data_dir=data_dir, pool_size=4, max_overflow=2)
    await db.migrate()
    store = RecallStore(db)
    recall = Recall(store)
    try:
        await store.record_many(ORG, [(c, s, at) for c, s, at, _ in made])
        if db.is_postgres:
            async with db.autocommit() as conn:
                await conn.exec_driver_sql("ANALYZE incident_recall")
        skills, memory, notes = context_org()
        base = FrozenContext(skills, memory, notes, "alice", "C-NEW")
        before = len(frozen_context(base).encode())
        hits, by_mention, times_ms, start_ms, sizes = 0, 0, [], [], []
        targets = rng.sample(made, args.repeats)
        for n, (channel, summary, _, kind) in enumerate(targets):
            text = alert(summary.services[0], kind, rng)
            started = time.perf_counter()
            await store.related(recall.viewer(ORG, f"C-NEW{n}"), recall_query(text), limit=3)
            times_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            lines = await recall.at_start(ORG, f"C-NEW{n}", f"s-{n}", text)
            start_ms.append((time.perf_counter() - started) * 1000)
            hits += any(f"-{channel}/)" in line for line in lines)
            sizes.append(len(frozen_context(replace(base, related=lines)).encode()))
            said = mention(summary.services[0], kind, rng)
            lines = await recall.at_start(ORG, f"C-MEN{n}", f"m-{n}", said)
            by_mention += any(f"-{channel}/)" in line for line in lines)
        times_ms.sort()
        start_ms.sort()
        return {
            "recall_at_3": round(hits / args.repeats, 3),
            "recall_at_3_mention": round(by_mention / args.repeats, 3),
            "lookup_p50_ms": round(statistics.median(times_ms), 2),
            "lookup_p99_ms": round(times_ms[int(0.99 * (len(times_ms) - 1))], 2),
            "at_start_p50_ms": round(statistics.median(start_ms), 2),
            "at_start_p99_ms": round(start_ms[int(0.99 * (len(start_ms) - 1))], 2),
            "first_message_bytes": max(sizes),
            "first_message_bytes_before": before,
        }
    finally:
        await db.dispose()


async def on_postgres(args: argparse.Namespace, data_dir: Path) -> dict[str, Any] | None:
    """The figures on a throwaway PostgreSQL database (None: the server is unreachable)."""
    name = f"warroom_bench_recall_{uuid.uuid4().hex[:8]}"
    try:
        admin = await asyncpg.connect(args.pg_admin_url)
    except (OSError, asyncpg.PostgresError):
        return None
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.pg_admin_url)._replace(path=f"/{name}"))
    try:
        return await measure(url, data_dir, args)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Both backends, then the worse of each figure on top."""
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await measure(None, Path(tmp), args)
        postgres = await on_postgres(args, Path(tmp))
    both = [f for f in (sqlite, postgres) if f is not None]
    worst = {
        "recall_at_3": min(f["recall_at_3"] for f in both),
        "recall_at_3_mention": min(f["recall_at_3_mention"] for f in both),
        "lookup_p50_ms": max(f["lookup_p50_ms"] for f in both),
        "lookup_p99_ms": max(f["lookup_p99_ms"] for f in both),
        "at_start_p50_ms": max(f["at_start_p50_ms"] for f in both),
        "at_start_p99_ms": max(f["at_start_p99_ms"] for f in both),
        "first_message_bytes": max(f["first_message_bytes"] for f in both),
        "first_message_bytes_before": sqlite["first_message_bytes_before"],
    }
    worst["first_message_added_bytes"] = (
        worst["first_message_bytes"] - worst["first_message_bytes_before"]
    )
    return {
        **worst,
        "incidents": args.incidents,
        "repeats": args.repeats,
        "postgres": postgres,
        "sqlite": sqlite,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--pg-admin-url", default=DEFAULT_ADMIN_URL)
    figures = asyncio.run(main(parser.parse_args()))
    goals = {
        "recall_at_3": (">=", 0.9),
        "lookup_p50_ms": ("<=", 20.0),
        "first_message_added_bytes": ("<=", 2048.0),
        "postgres.lookup_p50_ms": ("<=", 20.0),
        "sqlite.lookup_p50_ms": ("<=", 20.0),
    }
    print(json.dumps(figures | verdict(figures, goals)))
