"""The properties the drill proves, checked against what it observed.

``Evidence`` is gathered once the story has run: the sessions' rows and event logs,
the model requests each person's session made (as the scripted model saw them), the
calls the fake Slack Web API received, the shared files in the store, alice's requests
through the egress gateway and where its password was looked for, and what the driver
did (when it sent the steering reply, which worker it killed, which sandbox it
destroyed). ``evaluate`` turns it into one ``Check`` per property of the issues.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.drill import alert_scene, mcp_scene, record_check
from bot.drill import scenario as s
from bot.drill.record_check import RecordEvidence
from bot.drill.roles import MEMORY_INDEX, NOTES_INDEX, SKILLS_INDEX, rise_of
from bot.drill.scenario import CAROL
from bot.drill.steps import bash, read
from bot.drill.transcript import SANDBOX_REPLACED, Transcript
from harness import Checkpoint
from memory_store import EgressEntry, Event, FileVersion, Session, SessionStatus
from sandbox_client import SandboxHandle

PLAYBOOK_HEADING = "# Database connection-pool exhaustion"


@dataclass(frozen=True)
class Check:
    """One property: ``passed`` None means skipped (it cannot apply in this mode)."""

    name: str
    passed: bool | None
    detail: str

    @property
    def mark(self) -> str:
        """✓ passed, ✗ failed, – skipped."""
        return {True: "✓", False: "✗", None: "–"}[self.passed]


@dataclass(frozen=True)
class Kill:
    """The driver's SIGKILL: the worker process and the step it was running."""

    pid: int
    lease_owner: str
    step: str


@dataclass(frozen=True)
class SecretSweep:
    """Where the password the gateway injects was looked for, and where it was found.

    Attributes:
        found_in: the places that held it (or its basic-auth encoding); empty is the goal.
        sandbox_bytes: how much of alice's sandbox was read (None: it was not read).
        sandbox_env: whether that read held the sandbox's environment (its proxy variable).
        model_requests: the Messages API requests searched (every tool output is in them).
        slack_calls: the Slack Web API calls searched.
    """

    found_in: tuple[str, ...]
    sandbox_bytes: int | None
    sandbox_env: bool
    model_requests: int
    slack_calls: int


@dataclass(frozen=True)
class Evidence:
    """What the drill observed; maps are keyed by person name (``alice``, ``bob``, ``dave``).

    Attributes:
        mode: ``embedded`` or ``full``.
        steer_sent_at: how many model requests alice's session had made when carol's
            reply was sent (None: never sent).
        killed_gone: the killed worker process no longer runs.
        destroyed: the id of the sandbox destroyed from outside (None: none was).
        answer_posts: per person, successful posts per answer key (``chat.postMessage``,
            or the ``chat.stopStream`` ending the turn's stream with the answer).
        expected_500s: what counting the 500s in the seeded log must print.
        mcp_missing: why the drill ran without its MCP server (None: it ran with it).
        egress: alice's session's requests through the egress gateway, oldest first.
        egress_skipped: why the Prometheus scene did not run (None: it ran).
        secret: where the injected password was searched for (None: the scene did not run).
        postmortem: ``/incident/postmortem.md`` as frank's session left it (None: not written).
    """

    mode: str
    sessions: Mapping[str, Session]
    events: Mapping[str, Sequence[Event]]
    requests: Mapping[str, Sequence[Transcript]]
    steer_sent_at: int | None
    kill: Kill | None
    killed_gone: bool
    destroyed: str | None
    answer_posts: Mapping[str, Counter[str]]
    findings: FileVersion | None
    memory: FileVersion | None
    expected_500s: int
    mcp_missing: str | None = None
    record: RecordEvidence | None = None
    egress: Sequence[EgressEntry] = ()
    egress_skipped: str | None = None
    secret: SecretSweep | None = None
    postmortem: FileVersion | None = None

    def transcripts(self, name: str) -> Sequence[Transcript]:
        """The requests of ``name``'s session, oldest first (empty when none)."""
        return self.requests.get(name, ())

    def session_id(self, name: str) -> str:
        """``name``'s session id ("" when it never opened)."""
        session = self.sessions.get(name)
        return session.id if session is not None else ""

    def sandbox(self, name: str) -> SandboxHandle | None:
        """The sandbox handle in ``name``'s last committed checkpoint."""
        session = self.sessions.get(name)
        if session is None:
            return None
        handle = Checkpoint.from_json(session.checkpoint).sandbox or session.sandbox
        return SandboxHandle.from_json(handle) if handle else None

    def notices(self, name: str, topic: str) -> list[str]:
        """Texts of ``name``'s logged notices about ``topic``."""
        found = []
        for event in self.events.get(name, ()):
            payload = json.loads(event.payload_json) if event.kind == "notice" else {}
            if payload.get("topic") == topic:
                found.append(str(payload.get("text", "")))
        return found


def evaluate(e: Evidence) -> tuple[Check, ...]:
    """Every property of the drill, in the issue's order."""
    return (
        alert_started_session(e),
        alert_resolve_reached_session(e),
        playbook_read(e),
        commands_ran_in_sandbox(e),
        findings_written(e),
        second_session_saw_findings(e),
        steering_reached_model(e),
        killed_worker_replaced(e),
        sandbox_replaced(e),
        answers_posted_once(e),
        memory_in_next_index(e),
        past_incident_cited(e),
        mcp_tool_called(e),
        rollback_approved(e),
        timeline_listed(e),
        postmortem_cited(e),
        prometheus_through_gateway(e),
        no_secret_in_sandbox(e),
    )


def alert_started_session(e: Evidence) -> Check:
    """Alertmanager's post in the watched channel started a session in its thread before
    anyone mentioned the bot; the alert reached the model as fenced data; it answered."""
    name = "the alert started a session in its thread before anyone mentioned the bot"
    alert, alice = e.sessions.get(alert_scene.NAME), e.sessions.get("alice")
    seen = e.transcripts(alert_scene.NAME)
    opening = seen[0].opening if seen else ""
    fenced = "```alert" in opening and "not instructions" in opening.split("```")[0]
    first = alert is not None and (alice is None or alert.created_at < alice.created_at)
    nobody = alert is not None and alert.requester_id not in {p.user_id for p in s.PEOPLE}
    ok = first and nobody and fenced and _answered(e, alert_scene.NAME)
    detail = (
        "no session opened for the alert"
        if alert is None
        else f"opened {'first' if first else 'AFTER a mention'}, "
        f"alert {'fenced as data' if fenced else 'NOT fenced'}, "
        f"{'answered' if _answered(e, alert_scene.NAME) else 'no answer'}"
    )
    return Check(name, ok, detail)


def alert_resolve_reached_session(e: Evidence) -> Check:
    """Alertmanager's resolve joined the alert's thread and its session answered it."""
    name = "the alert's resolve reached its session, which answered whether it agrees"
    seen = e.transcripts(alert_scene.NAME)
    told = bool(seen) and seen[-1].told(alert_scene.RESOLVED)
    answers = sum(ev.kind == "post_done" for ev in e.events.get(alert_scene.NAME, ()))
    ok = told and answers >= 2
    return Check(name, ok, f"resolve {'told' if told else 'NOT told'}; {answers} answer(s)")


def rollback_approved(e: Evidence) -> Check:
    """Alice's agent asked before rolling back; carol approved in the thread; it ran once."""
    name = "the rollback waited for approval, carol approved, it ran once"
    events = e.events.get("alice", ())
    payloads = [json.loads(ev.payload_json) for ev in events]
    kinds = [ev.kind for ev in events]
    decided = [p for k, p in zip(kinds, payloads, strict=True) if k == "approval_decided"]
    seen = e.transcripts("alice")
    ran = seen[-1].last(bash(s.ROLLBACK)) if seen else None
    counted = seen[-1].last(bash(s.COUNT_ROLLBACKS)) if seen else None
    by = decided[0].get("decided_by") if decided else None
    ok = (
        "approval_requested" in kinds
        and len(decided) == 1
        and decided[0].get("status") == "approved"
        and by == CAROL.user_id
        and ran is not None
        and s.ROLLBACK_LINE in ran.output
        and counted is not None
        and counted.output.strip() == "1"
    )
    runs = counted.output.strip() if counted is not None else "unknown"
    return Check(name, ok, f"approved by {by or 'nobody'}; the command ran {runs} time(s)")


def timeline_listed(e: Evidence) -> Check:
    """The channel's timeline lists its messages, commands, writes and answers, linked."""
    ok, detail = record_check.timeline_listed(e.record, e.events)
    return Check(record_check.NAME, ok, detail)


def postmortem_cited(e: Evidence) -> Check:
    """Frank's session drafted the postmortem, every claim citing entries the timeline holds."""
    ok, detail = record_check.postmortem_cited(e.record, e.postmortem, e.session_id("frank"))
    return Check(record_check.POSTMORTEM, ok, detail)


def playbook_read(e: Evidence) -> Check:
    """Session one read the playbook its first message's skill index listed."""
    name = "playbook read from /skills"
    seen = e.transcripts("alice")
    if not seen:
        return Check(name, False, "alice's session made no model request")
    listed = seen[0].listed(SKILLS_INDEX, s.SKILL_NAME)
    call = seen[-1].last(read(s.SKILL_PATH))
    ok = listed and call is not None and not call.is_error and PLAYBOOK_HEADING in call.output
    where = "listed in its first message's skill index" if listed else "NOT in the skill index"
    return Check(name, ok, f"Read {s.SKILL_PATH} ({where})")


def commands_ran_in_sandbox(e: Evidence) -> Check:
    """A Bash command printed what the seeded files hold, in a local sandbox."""
    name = "commands ran in a real local sandbox"
    seen = e.transcripts("alice")
    call = seen[-1].last(bash(s.COUNT_500S)) if seen else None
    handle = e.sandbox("alice")
    printed = call.output if call is not None else "(not run)"
    ok = printed == str(e.expected_500s) and handle is not None and handle.provider == "local"
    where = f"{handle.provider} sandbox {handle.sandbox_id}" if handle else "no sandbox"
    return Check(
        name, ok, f"`{s.COUNT_500S}` printed {printed} (seeded: {e.expected_500s}); {where}"
    )


def findings_written(e: Evidence) -> Check:
    """Session one's findings are in the incident's shared notes."""
    name = "findings written to /incident/"
    f = e.findings
    if f is None:
        return Check(name, False, f"{s.FINDINGS_PATH} does not exist")
    ok = f.session_id == e.session_id("alice") and str(e.expected_500s) in f.content
    return Check(name, ok, f"{s.FINDINGS_PATH} v{f.version}, last written by alice's session")


def second_session_saw_findings(e: Evidence) -> Check:
    """Session two was told of session one's notes at a step boundary, and read them."""
    name = "session two saw session one's findings at its next step"
    seen = e.transcripts("bob")
    told = next((i for i, t in enumerate(seen) if t.announced(s.FINDINGS_PATH)), None)
    # The first message is frozen once committed, but a first step that a killed worker
    # never committed runs again and builds it afresh: what counts is the committed one.
    listed = bool(seen) and seen[-1].listed(NOTES_INDEX, s.FINDINGS_PATH)
    read_it = bool(seen) and seen[-1].ran(read(s.FINDINGS_PATH)) > 0
    if told is not None:
        detail = f'bob\'s model request #{told + 1} said "New shared files … {s.FINDINGS_PATH}"'
    elif listed:
        detail = f"bob's first message's incident index listed {s.FINDINGS_PATH}"
    else:
        detail = f"bob's session was never told of {s.FINDINGS_PATH}"
    return Check(name, (told is not None or listed) and read_it, detail)


def steering_reached_model(e: Evidence) -> Check:
    """Carol's reply reached session one's model after it was sent."""
    name = "a teammate's reply steered session one"
    seen = e.transcripts("alice")
    hit = next(
        (i for i, t in enumerate(seen) if any(s.CAROL.text in x.text for x in t.steering())), None
    )
    ok = hit is not None and e.steer_sent_at is not None and hit >= e.steer_sent_at
    if hit is None:
        return Check(name, False, "carol's reply never reached alice's model")
    return Check(
        name,
        ok,
        f"sent when alice's session had made {e.steer_sent_at} model request(s); "
        f"given to its model in request #{hit + 1}",
    )


def killed_worker_replaced(e: Evidence) -> Check:
    """A worker was SIGKILLed mid-step and another finished the session (full mode)."""
    name = "a worker SIGKILLed mid-step, another finished the session"
    if e.mode != "full":
        return Check(name, None, "skipped: the embedded mode runs every step in this process")
    if e.kill is None:
        return Check(name, False, "no worker was killed")
    answered = _answered(e, "alice")
    lost = any(
        ev.kind == "tool_unknown" and e.kill.step in json.loads(ev.payload_json).get("summary", "")
        for ev in e.events.get("alice", ())
    )
    how = "its outcome was lost" if lost else "its outcome was recovered from the sandbox"
    return Check(
        name,
        e.killed_gone and answered,
        f"pid {e.kill.pid} killed during `{e.kill.step}`; {how}; alice's session answered",
    )


def sandbox_replaced(e: Evidence) -> Check:
    """The sandbox destroyed from outside was replaced, and the model was told."""
    name = "sandbox destroyed from outside, replaced, model told"
    if e.destroyed is None:
        return Check(name, False, "no sandbox was destroyed")
    handle = e.sandbox("alice")
    replaced = handle is not None and handle.sandbox_id != e.destroyed
    told = any(t.told(SANDBOX_REPLACED) for t in e.transcripts("alice"))
    logged = bool(e.notices("alice", "sandbox_replaced"))
    now = handle.sandbox_id if handle else "none"
    return Check(
        name,
        replaced and told and logged,
        f"{e.destroyed} → {now}; the model {'was' if told else 'was NOT'} told",
    )


def answers_posted_once(e: Evidence) -> Check:
    """Each session's final answer reached the fake Slack API exactly once."""
    name = "each session's final answer posted to Slack exactly once"
    counts = {who: dict(e.answer_posts.get(who, Counter())) for who in ("alice", "bob", "dave")}
    ok = all(len(c) == 1 and set(c.values()) == {1} for c in counts.values())
    shown = ", ".join(f"{who}: {sorted(c.values()) or 'none'}" for who, c in counts.items())
    return Check(name, ok, f"posts per answer key: {shown}")


def memory_in_next_index(e: Evidence) -> Check:
    """Session three's first message lists the memory file session one wrote."""
    name = "session three's memory index lists session one's memory"
    first = e.transcripts("dave")[:1]
    before = e.transcripts("alice")[:1]
    listed = bool(first) and first[0].listed(MEMORY_INDEX, s.MEMORY_PATH)
    new = bool(before) and not before[0].listed(MEMORY_INDEX, s.MEMORY_PATH)
    by_alice = e.memory is not None and e.memory.session_id == e.session_id("alice")
    return Check(
        name,
        listed and new and by_alice,
        f"{s.MEMORY_PATH} {'listed' if listed else 'NOT listed'} in dave's first message",
    )


def past_incident_cited(e: Evidence) -> Check:
    """Session one was given last month's incident of another channel at its start, read
    it under /incidents/ and cited it in its answer."""
    name = "session one was given a past incident, read it and cited it"
    seen = e.transcripts("alice")
    if not seen:
        return Check(name, False, "alice's session made no model request")
    given = seen[0].related(s.PAST_DIR)
    call = seen[-1].last(read(s.PAST_SUMMARY_PATH))
    read_ok = call is not None and not call.is_error and s.PAST_FIX in call.output
    answers = [ev.payload_json for ev in e.events.get("alice", ()) if ev.kind == "answer"]
    cited = any(s.PAST_SUMMARY_PATH in text and s.PAST_FIX in text for text in answers)
    detail = (
        f"{s.PAST_DIR} {'given' if given else 'NOT given'} in its first message; "
        f"{'read' if read_ok else 'NOT read'}; {'cited' if cited else 'NOT cited'} in its answer"
    )
    return Check(name, given and read_ok and cited, detail)


def _answered(e: Evidence, name: str) -> bool:
    session = e.sessions.get(name)
    posted = any(ev.kind == "post_done" for ev in e.events.get(name, ()))
    return session is not None and session.status is SessionStatus.WAITING and posted


def mcp_tool_called(e: Evidence) -> Check:
    """Session three called an MCP server's tool (outside the sandbox) and got its answer."""
    name = "a scripted model called an MCP tool outside the sandbox"
    if e.mcp_missing is not None:
        return Check(name, None, f"skipped: {e.mcp_missing}")
    seen = e.transcripts("dave")
    call = seen[-1].last(mcp_scene.status_call()) if seen else None
    if call is None:
        offered = bool(seen) and mcp_scene.ECHO in seen[0].tools
        return Check(name, False, f"{mcp_scene.ECHO} {'not called' if offered else 'not offered'}")
    ok = not call.is_error and call.output == f"Echo: {mcp_scene.STATUS}"
    return Check(name, ok, f"dave's session called {mcp_scene.ECHO} over stdio: {call.output}")


def prometheus_through_gateway(e: Evidence) -> Check:
    """Session one asked the real Prometheus through the gateway (the password added there)
    and wrote down that the 500s rise from 14:02."""
    name = "session one found the 500s rising at 14:02 in the real Prometheus, via the gateway"
    if e.egress_skipped is not None:
        return Check(name, None, f"skipped: {e.egress_skipped}")
    seen = e.transcripts("alice")
    url = seen[-1].service_url(s.PROMETHEUS) if seen else None
    if url is None:
        return Check(name, False, "alice's system prompt did not list Prometheus")
    call = seen[-1].last(bash(s.prometheus_query(url)))
    if call is None:
        return Check(name, False, "alice's session never queried Prometheus")
    found = rise_of(call.output)
    audited = [r for r in e.egress if r.tool_use_id == call.id and r.rule == s.PROMETHEUS]
    injected = any(r.outcome == "injected" and r.status == 200 for r in audited)
    noted = e.findings is not None and "the 500s rise from 14:02 UTC" in e.findings.content
    ok = found is not None and found == ("14:02", e.expected_500s) and injected and noted
    shown = f"rise from {found[0]} UTC, {found[1]} by 14:10" if found else "no series"
    how = (
        f"GET {audited[-1].path} {audited[-1].outcome} by rule {audited[-1].rule} "
        f"({audited[-1].status})"
        if audited
        else "not in the egress audit"
    )
    where = "in" if noted else "NOT in"
    return Check(name, ok, f"{shown}; {how}; {where} {s.FINDINGS_PATH}")


def no_secret_in_sandbox(e: Evidence) -> Check:
    """The password the gateway injected reached no sandbox, model request or Slack call."""
    name = "no secret in the sandbox"
    if e.egress_skipped is not None:
        return Check(name, None, f"skipped: {e.egress_skipped}")
    sweep = e.secret
    if sweep is None or sweep.sandbox_bytes is None:
        return Check(name, False, "alice's sandbox was not read")
    ok = not sweep.found_in and sweep.sandbox_env
    where = ", ".join(sweep.found_in) if sweep.found_in else "none"
    if not sweep.sandbox_env:
        where += " (but the read did NOT hold the sandbox's environment)"
    return Check(
        name,
        ok,
        f"the Prometheus password found in: {where} (searched alice's sandbox: environment, "
        f"every process's, /workspace and /tmp, {sweep.sandbox_bytes} bytes; "
        f"{sweep.model_requests} model requests; {sweep.slack_calls} Slack calls)",
    )
