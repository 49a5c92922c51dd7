"""The incident drill (issue #7, item 5): the whole mission, end to end.

The two slow tests run the drill as a person would and assert every property of the
issue: the embedded drill through the real ``warroom drill`` command (one process,
SQLite, an in-process worker), the full drill through ``drill()`` against PostgreSQL,
Redis and two real ``dramatiq bot.durable.worker_main`` processes (where a worker is SIGKILLed
mid-step). Both use real local sandboxes, the real Slack app over signed HTTP, and
the fake Slack and Anthropic APIs.

The fast tests play the drill's scripted model against canned tool results, to pin
the behaviours the drill relies on: it is a function of the request, it redoes a
call whose outcome was lost, it follows a teammate's steering, and it reads the
playbook only when the skill index lists it.
"""

from __future__ import annotations

import doctest
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
from pydantic import SecretStr
from typer.testing import CliRunner

from bot import settings as settings_module
from bot.cli.app import app
from bot.drill import (
    DrillOptions,
    IncidentPolicy,
    channel,
    drill,
    mcp_scene,
    postmortem,
    roles,
    transcript,
)
from bot.drill import scenario as s
from bot.drill.checks import Evidence, evaluate
from bot.drill.egress import why_skipped
from bot.drill.prometheus import HOST
from bot.fakes.anthropic_api import RecordedRequest, Reply, ToolCall
from bot.settings import Settings, child_environment
from harness import (
    POSTMORTEM_PATH,
    Actor,
    ActorKind,
    Entry,
    EntryKind,
    Timeline,
    citations,
    postmortem_request,
)
from harness import timeline_markdown as render_timeline
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.conftest import missing

PROPERTIES = (
    "the alert started a session in its thread before anyone mentioned the bot",
    "the alert's resolve reached its session, which answered whether it agrees",
    "playbook read from /skills",
    "commands ran in a real local sandbox",
    "findings written to /incident/",
    "session two saw session one's findings at its next step",
    "a teammate's reply steered session one",
    "a worker SIGKILLed mid-step, another finished the session",
    "sandbox destroyed from outside, replaced, model told",
    "each session's final answer posted to Slack exactly once",
    "session three's memory index lists session one's memory",
    "session one was given a past incident, read it and cited it",
    "a scripted model called an MCP tool outside the sandbox",
    "the rollback waited for approval, carol approved, it ran once",
    "the incident timeline lists messages, commands and writes, linked",
    "the postmortem draft cites timeline entries that exist",
    "session one found the 500s rising at 14:02 in the real Prometheus, via the gateway",
    "no secret in the sandbox",
)
KILL = PROPERTIES[7]
MCP = PROPERTIES[12]
MCP_SKIPPED = mcp_scene.missing() is not None  # mcp-server-everything is not installed
PROMETHEUS_SCENE = PROPERTIES[16:]
LOST = (
    "The worker running this tool call stopped before its result was recorded, and the "
    "outcome could not be recovered. The command may or may not have run; check its "
    "effects before running it again."
)


# ----- the drill, end to end -------------------------------------------------------------


@pytest.fixture
def prometheus_installed() -> None:
    """The drill's Prometheus scene needs Prometheus and curl (``.ci/run`` installs them)."""
    if (reason := why_skipped()) is not None:
        missing(f"{reason}: .ci/run installs it")


@pytest.mark.slow
@pytest.mark.usefixtures("prometheus_installed")
async def test_warroom_drill_plays_the_incident_in_one_process_and_exits_0_with_every_check(
    tmp_path: Path,
) -> None:
    # Given a clean environment, no credentials at all
    env = warroom_env(tmp_path / "unused")
    # When a person runs `warroom drill`
    process = await start("drill", env=env, cwd=tmp_path)
    assert process.stdout is not None
    output = Output(process.stdout)
    await output.until(lambda text: "Drill checklist" in text and "skipped." in text, timeout_s=150)
    code = await finish(process)
    # Then the live log shows the people, the agent's tool calls and the answers as posted
    text = output.text
    assert "Alertmanager in #C-INC: [FIRING:1] HighErrorRate" in text  # before any mention
    assert text.index("Alertmanager in #C-INC") < text.index("alice in #C-INC")
    assert "warroom → the alert's thread (chat.stopStream):" in text  # its turn's stream
    assert f"carol in alice's thread: {s.CAROL.text}" in text
    assert f"→ Bash: {s.COUNT_500S}" in text
    assert "warroom → alice's thread (chat.stopStream):" in text
    assert "destroyed alice's sandbox" in text
    assert f"→ Bash: curl -sS -G https://{HOST}:" in text  # Prometheus, from the system prompt
    # And every property holds; the kill is skipped in one process
    checklist = text[text.index("Drill checklist") :]
    for name in PROPERTIES:
        mark = "–" if name == KILL or (name == MCP and MCP_SKIPPED) else "✓"
        assert f"  {mark} {name}:" in checklist, f"{name} did not pass:\n{checklist}"
    assert (
        f"rise from 14:02 UTC, {s.expected_500s()} by 14:10; "
        "GET /api/v1/query_range?query&start&end&step injected by rule prometheus (200)"
    ) in checklist
    assert "the Prometheus password found in: none" in checklist
    verdict = "16 passed, 0 failed, 2 skipped" if MCP_SKIPPED else "17 passed, 0 failed, 1 skipped"
    assert f"PASSED: {verdict}." in checklist
    assert MCP_SKIPPED or f"→ {mcp_scene.ECHO}" in text
    assert code == 0


@pytest.fixture
def queue_url(redis_url: str) -> Iterator[str]:
    """The test Redis database (``WARROOM_TEST_REDIS_URL``), empty before and after (a killed
    worker leaves its unacked message behind)."""
    url = redis_url
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.usefixtures("prometheus_installed")
async def test_the_full_drill_survives_a_killed_worker_and_a_destroyed_sandbox(
    postgres_url: str, queue_url: str
) -> None:
    lines: list[str] = []
    # Given PostgreSQL, Redis and two worker processes
    options = DrillOptions(database_url=postgres_url, redis_url=queue_url, workers=2)
    # When the incident is played, a worker SIGKILLed mid-step and a sandbox destroyed
    result = await drill(options, say=lines.append)
    # Then every property of the issue holds
    log = "\n".join(lines)
    assert result.stalled is None, log
    assert [c.name for c in result.checks] == list(PROPERTIES)
    skipped = {MCP} if MCP_SKIPPED else set()
    failed = [f"{c.name}: {c.detail}" for c in result.checks if c.passed is not True]
    assert not [f for f in failed if f.split(":")[0] not in skipped], f"{failed}\n{log}"
    assert result.passed
    kill = next(c for c in result.checks if c.name == KILL)
    assert "recovered from the sandbox" in kill.detail, log
    assert "!! drill: SIGKILL worker process" in log
    # And it left no Redis key behind (queues, acks, heartbeats, markers, the budget's)
    client = redis.Redis.from_url(queue_url)
    try:
        assert client.keys() == []
    finally:
        client.close()


def test_the_full_drill_without_a_shared_database_exits_2_naming_the_option() -> None:
    result = CliRunner().invoke(app, ["drill", "--redis-url", "redis://127.0.0.1:6379/13"])

    assert result.exit_code == 2
    assert "--database-url" in result.output


@pytest.mark.parametrize("module", [channel, settings_module, roles, transcript, postmortem])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0


def test_a_worker_environment_carries_the_settings_and_nothing_inherited_of_ours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6379/0")
    monkeypatch.setenv("slack_mode", "socket")
    monkeypatch.setenv("WARROOM_CRASH_AT", "before_model@0")
    settings = Settings.model_construct(
        slack_bot_token=SecretStr("xoxb-drill"), slack_mode="http", lease_s=2.0
    )

    env = child_environment(settings, {"dramatiq_worker_timeout": "100"})

    assert env["SLACK_BOT_TOKEN"] == "xoxb-drill"
    assert env["WARROOM_SLACK_MODE"] == "http"
    assert env["WARROOM_LEASE_S"] == "2.0"
    assert env["dramatiq_worker_timeout"] == "100"
    assert "REDIS_URL" not in env
    assert "slack_mode" not in env
    assert "WARROOM_CRASH_AT" not in env
    assert "PATH" in env


# ----- the scripted model ----------------------------------------------------------------

RESULTS = {
    s.SKILL_PATH: s.SKILL_MD,
    s.COUNT_500S: str(s.expected_500s()),
    s.SHOW_DEPLOYS: s.DEPLOY_LOG_TEXT,
    s.SAMPLE_POOL: s.POOL_STATS_LINE,
    s.SHOW_DB_CONFIG: s.DB_YAML,
    s.SAMPLE_ERRORS: s.ERROR_RATE_LINE,
    s.MEMORY_PATH: "checkout-api 500s right after a deploy: check the DB pool.",
}


def opening(
    person: s.Person, *, skills: str = "", memory: str = "(empty)", related: str = ""
) -> dict[str, Any]:
    """A first user message as the harness builds it (frozen context, then the request)."""
    context = (
        "<system-reminder>\nSkills available (load one with the Skill tool when it applies):\n"
        f"{skills or '(no skills yet)'}\n\nOrg memory (/memory/):\n{memory}\n\n"
        f"Notes of this incident (channel {s.CHANNEL}, /incident/):\n(no notes yet)\n\n"
        + (f"{related}\n\n" if related else "")
        + f"This session was started by <@{person.user_id}>.\n</system-reminder>"
    )
    asked = postmortem_request() if person is s.FRANK else person.text  # as the Slack edge asks
    return {"role": "user", "content": [text(context), text(asked)]}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def request(
    messages: list[dict[str, Any]], tools: Sequence[str] = (), system: str = ""
) -> RecordedRequest:
    body: dict[str, Any] = {"model": "m", "max_tokens": 1, "messages": messages}
    if tools:
        body["tools"] = [{"name": n, "description": "", "input_schema": {}} for n in tools]
    if system:
        body["system"] = [{"type": "text", "text": system}]
    return RecordedRequest(json.dumps(body).encode(), body, {})


def play(
    messages: list[dict[str, Any]],
    *,
    results: Mapping[str, str | Sequence[str]] = RESULTS,
    later: Mapping[int, str] | None = None,
    tools: Sequence[str] = (),
    system: str = "",
) -> tuple[list[ToolCall], str]:
    """Run the policy against canned tool results until it answers.

    A result given as a sequence answers successive calls in turn. ``later`` maps a
    model-call number to a text given with the results before it (a teammate's
    message, a notice). Returns the tool calls made, in order, and the answer.
    """
    policy, served = IncidentPolicy(), Counter[str]()
    calls: list[ToolCall] = []
    for turn in range(30):
        reply = policy(request(messages, tools, system))
        again = policy(request(messages, tools, system))
        assert reply == again, "the same request must get the same reply"
        made = [c for c in reply.content if isinstance(c, ToolCall)]
        if not made:
            return calls, "".join(c for c in reply.content if isinstance(c, str))
        calls += made
        messages = [*messages, assistant(reply, turn)]
        outcome = []
        for call in made:
            canned = results.get(_key(call), "ok")
            if not isinstance(canned, str):
                canned = canned[min(served[_key(call)], len(canned) - 1)]
            served[_key(call)] += 1
            outcome.append(result(f"t{turn}", canned))
        extra = [text(later[turn + 1])] if later and turn + 1 in later else []
        messages.append({"role": "user", "content": outcome + extra})
    raise AssertionError("the policy never answered")


def assistant(reply: Reply, turn: int) -> dict[str, Any]:
    blocks = [
        text(c)
        if isinstance(c, str)
        else {"type": "tool_use", "id": f"t{turn}", "name": c.name, "input": dict(c.input)}
        for c in reply.content
        if isinstance(c, str | ToolCall)  # the drill's policy does not think aloud
    ]
    return {"role": "assistant", "content": blocks}


def result(tool_use_id: str, content: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


def _key(call: ToolCall) -> str:
    return str(
        call.input.get("command") or call.input.get("file_path") or call.input.get("message") or ""
    )


def commands(calls: list[ToolCall]) -> list[str]:
    return [_key(c) for c in calls]


def test_the_scripted_investigation_reads_the_playbook_then_gathers_evidence_then_notes_it() -> (
    None
):
    skills = f"- {s.SKILL_NAME}: Diagnose HTTP 500s caused by an exhausted pool."

    calls, answer = play([opening(s.ALICE, skills=skills)])

    assert commands(calls) == [
        s.SKILL_PATH,
        "",  # TodoWrite
        s.COUNT_500S,
        s.SHOW_DEPLOYS,
        s.SAMPLE_POOL,
        s.FINDINGS_PATH,
        s.SAMPLE_ERRORS,
        s.ROLLBACK,
        s.COUNT_ROLLBACKS,
        s.MEMORY_PATH,
        "",
    ]
    assert f"*{s.expected_500s()}* failed requests" in answer
    assert "pool_size 20 -> 5" in answer


def test_a_related_past_incident_in_the_first_message_is_read_and_cited() -> None:
    related = (
        "Related past incidents of this org, found by searching …:\n"
        f"- 2026-10-12 in <#{s.PAST_CHANNEL}>, checkout-api 500s ({s.PAST_DIR}): fix: rolled back"
    )

    calls, answer = play(
        [opening(s.ALICE, related=related)],
        results={**RESULTS, s.PAST_SUMMARY_PATH: s.PAST_SUMMARY},
    )

    assert commands(calls)[:2] == [s.PAST_SUMMARY_PATH, ""]  # then the todo list
    assert f"`{s.PAST_SUMMARY_PATH}`); what fixed it then: {s.PAST_FIX}." in answer
    _, without = play([opening(s.ALICE)])
    assert s.PAST_SUMMARY_PATH not in without


def test_without_the_playbook_in_the_skill_index_the_investigation_does_not_read_it() -> None:
    calls, _ = play([opening(s.ALICE)])

    assert s.SKILL_PATH not in commands(calls)
    assert calls[0].name == "TodoWrite"


def test_a_teammates_message_adds_the_pool_config_and_is_acknowledged_in_the_answer() -> None:
    steer = f"Message from <@{s.CAROL.user_id}> in the incident thread:\n{s.CAROL.text}"

    calls, answer = play([opening(s.ALICE)], later={3: steer})

    done = commands(calls)
    assert done.index(s.SHOW_DB_CONFIG) < done.index(s.SAMPLE_ERRORS)
    edit = next(c for c in calls if c.name == "Edit")
    assert "pool_size: 5" in edit.input["new_string"]
    assert f"As <@{s.CAROL.user_id}> asked" in answer
    assert "`pool_size: 5`" in answer


def test_a_command_whose_outcome_was_lost_is_run_again_and_the_replacement_is_mentioned() -> None:
    replaced = (
        "<system-reminder>\nThe sandbox was replaced by a new one (sbx-2).\n</system-reminder>"
    )
    results = {**RESULTS, s.SAMPLE_ERRORS: (LOST, s.ERROR_RATE_LINE)}

    # the error-rate sample is model call 5; its lost outcome and the notice come before 6
    calls, answer = play([opening(s.ALICE)], results=results, later={6: replaced})

    assert commands(calls).count(s.SAMPLE_ERRORS) == 2
    assert "sandbox was replaced mid-investigation" in answer
    assert s.ERROR_RATE_LINE in answer


def test_the_next_incident_reads_the_memory_its_index_lists() -> None:
    memory = f"- {s.MEMORY_PATH} (updated 2026-11-30 14:30 UTC): checkout-api 500s after a deploy"

    calls, answer = play([opening(s.DAVE, memory=memory)])

    assert commands(calls) == [s.MEMORY_PATH]
    assert "check the DB pool" in answer


def test_the_next_incident_checks_the_status_page_through_mcp_when_it_is_offered() -> None:
    results = {**RESULTS, mcp_scene.STATUS: f"Echo: {mcp_scene.STATUS}"}

    calls, answer = play([opening(s.DAVE)], results=results, tools=("Read", mcp_scene.ECHO))

    assert [(c.name, dict(c.input)) for c in calls] == [
        (mcp_scene.ECHO, {"message": mcp_scene.STATUS})
    ]
    assert answer.startswith(f"Status page (MCP): Echo: {mcp_scene.STATUS}\n")


def _timeline(*rows: tuple[EntryKind, str]) -> Timeline:
    """A timeline of ``(kind, summary)`` rows, one a minute from 14:02 UTC."""
    who = Actor(ActorKind.AGENT, "", "agent")
    entries = tuple(
        Entry(n, datetime.fromisoformat(f"2026-11-30T14:{n + 1:02d}:00+00:00"), who, kind,
              summary, None, "s1", f"r{n}")
        for n, (kind, summary) in enumerate(rows, start=1)
    )  # fmt: skip
    return Timeline("T1", s.CHANNEL, None, entries, 2)


def test_the_postmortem_session_reads_the_timeline_then_writes_a_draft_citing_it() -> None:
    # Given the timeline of the incident so far
    timeline = _timeline(
        (EntryKind.MESSAGE, s.ALICE.text),
        (EntryKind.COMMAND, f"`{s.COUNT_500S}` → exit 0"),
        (EntryKind.COMMAND, f"`{s.SHOW_DEPLOYS}` → exit 0"),
        (EntryKind.COMMAND, f"`{s.SAMPLE_POOL}` → exit 0"),
        (EntryKind.FILE, f"wrote {s.FINDINGS_PATH}"),
        (EntryKind.ANSWER, "checkout-api 500s: the database connection pool is exhausted"),
    )
    timeline_path = postmortem.TIMELINE
    results = {**RESULTS, timeline_path: render_timeline(timeline)}
    # When frank's `@warroom postmortem` session runs (the edge asks the postmortem request)
    calls, answer = play([opening(s.FRANK)], results=results)
    # Then it read the timeline, then wrote the draft, every claim citing entries that exist
    assert [(c.name, _key(c)) for c in calls] == [
        ("Read", timeline_path),
        ("Write", POSTMORTEM_PATH),
    ]
    found = citations(calls[1].input["content"], timeline)
    assert found.sound, found
    assert found.cited == {"T1", "T2", "T3", "T4", "T5", "T6"}
    draft = calls[1].input["content"]
    assert "- 14:02:00 UTC: the 500s were reported in the channel [T1]." in draft
    assert answer.startswith(f"*Postmortem drafted in `{POSTMORTEM_PATH}`*")
    assert "(T1, T2, T3, T4, T5, T6)" in answer


def test_a_postmortem_claim_whose_entry_the_timeline_lacks_says_so_instead_of_citing() -> None:
    timeline = _timeline((EntryKind.MESSAGE, s.ALICE.text))
    results = {**RESULTS, postmortem.TIMELINE: render_timeline(timeline)}

    calls, _ = play([opening(s.FRANK)], results=results)

    draft = calls[-1].input["content"]
    found = citations(draft, timeline)
    assert found.sound, found
    assert found.cited == {"T1"}
    assert "pool_size from 20 to 5 in config/db.yaml (not in the record)." in draft


def test_without_server_everything_the_mcp_check_is_skipped_saying_why() -> None:
    evidence = Evidence(
        mode="embedded",
        sessions={},
        events={},
        requests={},
        steer_sent_at=None,
        kill=None,
        killed_gone=False,
        destroyed=None,
        answer_posts={},
        findings=None,
        memory=None,
        expected_500s=64,
        mcp_missing="mcp-server-everything is not installed (npm install -g …)",
    )

    check = next(c for c in evaluate(evidence) if c.name == MCP)

    assert check.passed is None
    assert check.detail == "skipped: mcp-server-everything is not installed (npm install -g …)"


PROM_URL = f"https://{HOST}:9090"
SYSTEM_WITH_PROMETHEUS = (
    "You are Warroom…\n\n# Systems you can reach\nYour sandbox reaches the network only "
    f"through Warroom's egress gateway…\n- {s.PROMETHEUS}: {PROM_URL} (GET, HEAD; credential "
    "added by the gateway): checkout-api's request counters\n"
)


def _at(hh_mm_ss: str) -> int:
    return int(datetime.fromisoformat(f"2026-11-30T{hh_mm_ss}+00:00").timestamp())


def test_with_prometheus_in_the_system_prompt_the_investigation_finds_when_the_500s_began() -> None:
    # Given a system prompt listing Prometheus, which answers the query with a rising counter
    values = [[_at("14:01:45"), "0"], [_at("14:02:00"), "0"], [_at("14:02:15"), "2"]]
    values.append([_at("14:10:00"), str(s.expected_500s())])
    matrix = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"code": "500"}, "values": values}]}}  # fmt: skip
    query = s.prometheus_query(PROM_URL)
    # When the scripted investigation runs
    calls, answer = play(
        [opening(s.ALICE)], results={**RESULTS, query: json.dumps(matrix)},
        system=SYSTEM_WITH_PROMETHEUS,
    )  # fmt: skip
    # Then it queried the URL the system prompt gave, after the deploys, and noted the rise
    done = commands(calls)
    assert done.index(s.SHOW_DEPLOYS) + 1 == done.index(query)
    finding = f"the 500s rise from 14:02 UTC, {s.expected_500s()} by 14:10"
    notes = next(c for c in calls if c.input.get("file_path") == s.FINDINGS_PATH)
    assert finding in notes.input["content"]
    assert finding in answer


def test_the_prometheus_history_counts_the_500s_the_log_shows() -> None:
    last = s.prometheus_history().splitlines()[-2]
    assert last.startswith('http_requests_total{code="500",service="checkout-api"} ')
    assert int(last.split()[1]) == s.expected_500s()
    assert s.prometheus_history().endswith("# EOF\n")


def test_without_prometheus_the_scene_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a machine where prometheus is not on the PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = why_skipped()
    assert reason is not None
    assert "Prometheus is not installed" in reason
    # Then both of its checks are reported skipped, saying why
    evidence = Evidence(
        mode="embedded", sessions={}, events={}, requests={}, steer_sent_at=None, kill=None,
        killed_gone=False, destroyed=None, answer_posts={}, findings=None, memory=None,
        expected_500s=s.expected_500s(), egress_skipped=reason,
    )  # fmt: skip
    checks = {c.name: c for c in evaluate(evidence)}
    for name in PROMETHEUS_SCENE:
        assert checks[name].passed is None
        assert checks[name].detail == f"skipped: {reason}"
