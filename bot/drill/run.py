"""The drill driver: stage everything, play the incident, check every property.

Used by ``warroom drill`` and by the tests. ``drill`` prints a live log and a final
checklist through ``say`` and returns a ``DrillResult``; it passes only when every
check that applies to the mode passed and the story ran to its end.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.cli.signals import run_interruptible
from bot.drill import alert_scene, scenario
from bot.drill.checks import Check, Evidence, SecretSweep, evaluate
from bot.drill.narrator import ANSWER_METHODS, post_key
from bot.drill.prometheus import USER
from bot.drill.record_check import RecordEvidence, gather_record
from bot.drill.scenario import ALICE, BOB, DAVE, FRANK
from bot.drill.stage import DrillOptions, Stage, staged
from bot.drill.story import Record, Story
from bot.fakes.slack_api import BOT_USER_ID, WORKSPACE_URL
from memory_store import EgressEntry, FileNotFound, FileVersion, Namespace, Scope


@dataclass(frozen=True)
class DrillResult:
    """The outcome of one drill.

    Attributes:
        mode: ``embedded`` or ``full``.
        checks: one per property, in the issue's order.
        elapsed_s: wall time of the whole drill, start-up and clean-up included.
        stalled: what the story was waiting for when it gave up (None: it finished).
        sessions: person name → session id.
        timings: seconds, by what they measure: ``<person>_answered_s`` (since alice's
            first message), ``kill_to_recovered_s`` (the SIGKILL to the killed step's
            result, recovered by another worker), ``destroy_to_replaced_s`` (destroying
            the sandbox to its replacement being recorded).
        data_dir: the drill's directory when it was kept, else None.
    """

    mode: str
    checks: tuple[Check, ...]
    elapsed_s: float
    stalled: str | None
    sessions: dict[str, str]
    timings: dict[str, float]
    data_dir: Path | None = None
    org_id: str | None = None  # with data_dir: the kept incident's org, for export-incident

    @property
    def passed(self) -> bool:
        """No check failed and the story finished."""
        return self.stalled is None and all(c.passed is not False for c in self.checks)

    def checklist(self) -> list[str]:
        """The closing lines: one per check, then the verdict."""
        lines = ["", f"Drill checklist ({self.mode} mode, {self.elapsed_s:.1f} s):"]
        for check in self.checks:
            lines.append(f"  {check.mark} {check.name}: {check.detail}")
        if self.stalled:
            lines.append(f"  ✗ the story did not finish: {self.stalled}")
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append(
            f"{verdict}: {sum(c.passed is True for c in self.checks)} passed, "
            f"{sum(c.passed is False for c in self.checks)} failed, "
            f"{sum(c.passed is None for c in self.checks)} skipped."
        )
        if self.data_dir is not None:
            lines.append(f"Logs and data kept in {self.data_dir}")
            if self.org_id is not None:
                lines.append(f"The incident: channel {scenario.CHANNEL}, org {self.org_id}")
        return lines


def run_drill(options: DrillOptions, *, say: Callable[[str], None] = print) -> DrillResult:
    """``drill`` on a new event loop. Blocks.

    Raises:
        DrillError: a part of the drill did not start.
        DatabaseUnavailable: the database could not be reached.
    """
    return run_interruptible(drill(options, say=say))


async def drill(options: DrillOptions, *, say: Callable[[str], None] = print) -> DrillResult:
    """Run the drill (see the module docstring).

    Raises:
        DrillError: a part of the drill did not start.
        DatabaseUnavailable: the database could not be reached.
    """
    started = time.monotonic()
    async with staged(options, say) as stage:
        _introduce(stage, say)
        record = await Story(stage).play()
        evidence = await gather(stage, record)
        await stage.narrator.catch_up()
    result = DrillResult(
        mode=options.mode,
        checks=evaluate(evidence),
        elapsed_s=time.monotonic() - started,
        stalled=record.stalled,
        sessions=dict(record.sessions),
        timings=timings(record, evidence),
        data_dir=stage.data_dir if options.keep else None,
        org_id=stage.channel.org_id if options.keep else None,
    )
    for line in result.checklist():
        say(line)
    return result


async def gather(stage: Stage, record: Record) -> Evidence:
    """Read back what happened: sessions, event logs, requests, posts, shared files."""
    sessions, events = {}, {}
    for name, session_id in record.sessions.items():
        if (session := await stage.sessions.get(session_id)) is not None:
            sessions[name] = session
        events[name] = await stage.sessions.events(session_id)
    names = {session_id: name for name, session_id in record.sessions.items()}
    posts: dict[str, Counter[str]] = {}
    answer_ts: set[str] = set()
    for call in stage.slack.calls:  # a message, or the turn's stream ended with the answer
        key = post_key(call.args)
        if call.method in ANSWER_METHODS and ":answer:" in key and call.response.get("ok"):
            posts.setdefault(names.get(key.split(":", 1)[0], ""), Counter())[key] += 1
            answer_ts.add(str(call.response.get("ts")))
    org = stage.channel.org_id
    return Evidence(
        mode=stage.options.mode,
        sessions=sessions,
        events=events,
        requests={
            **{p.name: stage.policy.requests_of(p) for p in (ALICE, BOB, DAVE, FRANK)},
            alert_scene.NAME: stage.policy.requests_named(alert_scene.NAME),
        },
        steer_sent_at=record.steer_sent_at,
        kill=record.kill,
        killed_gone=record.kill is not None
        and stage.pool is not None
        and not stage.pool.running(record.kill.pid),
        destroyed=record.destroyed,
        answer_posts=posts,
        findings=await _file(
            stage, Namespace(org, Scope.INCIDENT, scenario.CHANNEL), "/findings.md"
        ),
        memory=await _file(stage, Namespace(org, Scope.MEMORY), "/checkout-api.md"),
        postmortem=await _file(
            stage, Namespace(org, Scope.INCIDENT, scenario.CHANNEL), "/postmortem.md"
        ),
        expected_500s=scenario.expected_500s(),
        mcp_missing=stage.mcp_missing,
        record=await _record(stage, frozenset(answer_ts)),
        egress=await _egress_of(stage, record.sessions.get("alice")),
        egress_skipped=stage.egress_skipped,
        secret=secret_sweep(stage, record),
    )


async def _record(stage: Stage, answer_ts: frozenset[str]) -> RecordEvidence | None:
    """The channel's timeline and what Slack holds, for the incident record's check."""
    if stage.db is None:
        return None
    return await gather_record(
        stage.db,
        stage.channel.org_id,
        scenario.CHANNEL,
        workspace_url=WORKSPACE_URL,
        messages=stage.slack.state.messages.get(scenario.CHANNEL, []),
        bot_user_id=BOT_USER_ID,
        answer_ts=answer_ts,
    )


async def _egress_of(stage: Stage, session_id: str | None) -> list[EgressEntry]:
    if session_id is None:
        return []
    return await stage.egress_log.recent(session_id, limit=100)


def secret_sweep(stage: Stage, record: Record) -> SecretSweep | None:
    """Search what alice's sandbox held, every model request and every Slack call for the
    password the gateway injects, raw or in its basic-auth form (None: no scene)."""
    if stage.egress is None:
        return None
    password = stage.egress.secret
    basic = base64.b64encode(f"{USER}:{password}".encode()).decode()
    forms = (password, basic)
    found = []
    sandbox = record.sandbox_sweep
    if sandbox is not None and any(f in sandbox for f in forms):
        found.append("alice's sandbox")
    requests = stage.model.requests
    if any(f.encode() in r.raw for r in requests for f in forms):
        found.append("a model request")
    calls = stage.slack.calls
    if any(f in json.dumps(c.args) + json.dumps(c.response) for c in calls for f in forms):
        found.append("a Slack call")
    return SecretSweep(
        found_in=tuple(found),
        sandbox_bytes=len(sandbox.encode()) if sandbox is not None else None,
        sandbox_env=sandbox is not None and "HTTPS_PROXY=" in sandbox,
        model_requests=len(requests),
        slack_calls=len(calls),
    )


def timings(record: Record, evidence: Evidence) -> dict[str, float]:
    """The ``DrillResult.timings`` of a played story (only what happened)."""
    marks = record.marks
    found: dict[str, float] = {}
    for name in ("alice", "bob", "dave"):
        if f"{name} answered" in marks and "started" in marks:
            found[f"{name}_answered_s"] = marks[f"{name} answered"] - marks["started"]
    alice = evidence.events.get("alice", ())
    if "killed" in marks:
        done = [
            e for e in alice if e.kind == "tool_result" and scenario.SAMPLE_POOL in e.payload_json
        ]
        if done:
            found["kill_to_recovered_s"] = done[0].created_at.timestamp() - marks["killed"]
    if "destroyed" in marks:
        told = [e for e in alice if e.kind == "notice" and "sandbox_replaced" in e.payload_json]
        if told:
            found["destroy_to_replaced_s"] = told[0].created_at.timestamp() - marks["destroyed"]
    return {k: round(v, 2) for k, v in found.items()}


async def _file(stage: Stage, ns: Namespace, path: str) -> FileVersion | None:
    with contextlib.suppress(FileNotFound):
        return await stage.files.read(ns, path)
    return None


def _egress_line(stage: Stage) -> str:
    if stage.egress is None:
        return f"  egress: none (the Prometheus scene is skipped: {stage.egress_skipped})"
    return (
        f"  egress: a real Prometheus at {stage.egress.prometheus.base_url} (TLS, basic auth), "
        "reachable only through the gateway, which adds the password"
    )


def _introduce(stage: Stage, say: Callable[[str], None]) -> None:
    options = stage.options
    if options.redis_url is None:
        workers = "an in-process Dramatiq worker over the in-memory broker"
    else:
        workers = f"{options.workers} `dramatiq bot.durable.worker_main` processes over Redis"
    database = "SQLite in the drill's directory" if options.database_url is None else "PostgreSQL"
    lines = [
        f"Warroom drill ({options.mode} mode): a scripted incident against fake Slack and "
        "Anthropic APIs.",
        f"  Slack app (HTTP mode, signed requests): {stage.edge.url}",
        f"  fake Slack Web API: {stage.slack.base_url}   fake Messages API: {stage.model.base_url}",
        f"  workers: {workers}; database: {database}; sandboxes: local (bubblewrap)",
        "  seeded: /workspace (checkout-api logs, config/db.yaml, deploy log), "
        f"{scenario.SKILL_PATH}, {scenario.SEEDED_MEMORY_PATH}",
        _egress_line(stage),
        "",
    ]
    for line in lines:
        say(line)
