"""What each person's session does in the drill: alice investigates, bob checks the
database side in parallel, dave asks in a later incident (and checks the status page through
an MCP server when one is offered: ``mcp_scene``). Each has a plan (``Step``s)
and a final answer built from the evidence in the transcript.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from bot.drill import mcp_scene
from bot.drill import scenario as s
from bot.drill.steps import Step, bash, line_with, output_of, read, todos, write
from bot.drill.transcript import SANDBOX_REPLACED, Call, Transcript

MAX_DB_SAMPLES = 6
SKILLS_INDEX = "Skills available"
MEMORY_INDEX = "Org memory"
NOTES_INDEX = "Notes of this incident"
SUSPECT = "- Suspected cause: the DB connection pool is exhausted."
ALICE_TODOS = (
    ("Count the 500s in the checkout-api log", "Counting the 500s"),
    ("Check the last deploy", "Checking the last deploy"),
    ("Sample the DB pool", "Sampling the DB pool"),
    ("Write the findings to /incident/findings.md", "Writing the findings"),
)
ASKED_TODO = ("Check the DB pool size (asked in the thread)", "Checking the pool size")


# ----- alice: the investigation -------------------------------------------------------


def alice_plan(t: Transcript) -> list[Step]:
    """Playbook, evidence (Prometheus too, when the system prompt lists it), notes; the pool
    config when steered; memory; answer."""
    steered = bool(t.steering())
    prometheus = t.service_url(s.PROMETHEUS)
    items = ALICE_TODOS + ((ASKED_TODO,) if steered else ())
    start = todos(
        *((c, "in_progress" if i == 0 else "pending", a) for i, (c, a) in enumerate(ALICE_TODOS))
    )
    finish = todos(*((c, "completed", a) for c, a in items))
    return [
        Step(
            "There is a playbook for this; reading it first.",
            read(s.SKILL_PATH),
            wanted=t.listed(SKILLS_INDEX, s.SKILL_NAME),
        ),
        Step(
            "This looks like a past incident I was given; reading how it was fixed.",
            read(s.PAST_SUMMARY_PATH),
            wanted=t.related(s.PAST_DIR),
        ),
        Step("Here is my plan.", start),
        Step("Counting the failing requests.", bash(s.COUNT_500S)),
        Step("Checking the last deploys.", bash(s.SHOW_DEPLOYS)),
        Step(
            "Asking Prometheus when the 500s started.",
            bash(s.prometheus_query(prometheus or "")),
            wanted=prometheus is not None,
        ),
        Step("Sampling the connection pool.", bash(s.SAMPLE_POOL)),
        Step("Writing what I have to the incident notes.", write(s.FINDINGS_PATH, findings(t))),
        Step("Checking the pool size, as asked.", bash(s.SHOW_DB_CONFIG), wanted=steered),
        Step(
            "Adding the pool size to the notes.",
            Call("", "Edit", pool_edit(t)),
            wanted=steered and t.ran(bash(s.SHOW_DB_CONFIG)) > 0,
        ),
        Step("Confirming it is still happening.", bash(s.SAMPLE_ERRORS)),
        Step("Rolling back the deploy that shrank the pool (it needs approval).", bash(s.ROLLBACK)),
        Step("Checking the rollback ran once.", bash(s.COUNT_ROLLBACKS)),
        Step("Saving the lesson to org memory.", write(s.MEMORY_PATH, memory_note(t))),
        Step("", finish),
    ]


def findings(t: Transcript) -> str:
    """The incident note: what the evidence so far shows."""
    deploy = line_with(output_of(t, bash(s.SHOW_DEPLOYS)), "pool_size")
    return (
        "# checkout-api 500s\n\n"
        f"- {output_of(t, bash(s.COUNT_500S))} requests failed with HTTP 500 since 14:02, each "
        '"timeout acquiring connection from pool" (logs/checkout-api.log)\n'
        + "".join(f"- {line}\n" for line in prometheus_finding(t))
        + f"- last deploy: {deploy}\n"
        f"- pool sample: {output_of(t, bash(s.SAMPLE_POOL))}\n"
        f"{SUSPECT}\n"
    )


def prometheus_finding(t: Transcript) -> list[str]:
    """What the Prometheus query showed (nothing when it was not made, or said nothing)."""
    url = t.service_url(s.PROMETHEUS)
    found = rise_of(output_of(t, bash(s.prometheus_query(url)))) if url else None
    if found is None:
        return []
    rise, total = found
    return [f"Prometheus (`{s.PROM_SERIES}`): the 500s rise from {rise} UTC, {total} by 14:10."]


def rise_of(output: str) -> tuple[str, int] | None:
    """From a ``query_range`` answer: the minute (UTC) the counter first rose, and its last
    value; None when the answer holds no such series.

    >>> rise_of('{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
    ...         '"values":[[1796047320,"0"],[1796047335,"2"],[1796047800,"64"]]}]}}')
    ('14:02', 64)
    """
    try:
        values = json.loads(output)["data"]["result"][0]["values"]
        points = [(float(at), float(value)) for at, value in values]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    pairs = zip(points[1:], points, strict=False)
    rising = [at for (at, value), (_, before) in pairs if value > before]
    if not rising:
        return None
    return f"{datetime.fromtimestamp(rising[0], UTC):%H:%M}", int(points[-1][1])


def pool_edit(t: Transcript) -> dict[str, Any]:
    """Edit input adding the configured pool size under the suspected cause."""
    size = line_with(output_of(t, bash(s.SHOW_DB_CONFIG)), "pool_size:")
    who = t.steering()[0].user if t.steering() else "a teammate"
    added = f"{SUSPECT}\n- config/db.yaml: `{size}` (checked as {who} asked)"
    return {"file_path": s.FINDINGS_PATH, "old_string": SUSPECT, "new_string": added}


def memory_note(t: Transcript) -> str:
    """The durable lesson for ``/memory/checkout-api.md`` (first line: its summary)."""
    return (
        "checkout-api 500s right after a deploy: check the DB pool (2026-11-30 incident).\n"
        "v2.14.0 lowered pool_size 20 -> 5 in config/db.yaml; requests then timed out "
        'with "timeout acquiring connection from pool".\n'
        "Check: sh bin/pool-stats checkout-api (in_use == size, requests waiting). "
        "Fix: roll back, or raise pool_size.\n"
    )


def alice_answer(t: Transcript) -> str:
    """The final answer: the cause, the evidence, steering and sandbox events, next steps."""
    lines = [
        "*checkout-api 500s: the database connection pool is exhausted since the 14:02 deploy.*",
        "",
        f"- `{s.COUNT_500S}` → *{output_of(t, bash(s.COUNT_500S))}* failed requests, all after "
        '14:02, each "timeout acquiring connection from pool".',
        *(f"- {line}" for line in prometheus_finding(t)),
        f"- Last deploy: `{line_with(output_of(t, bash(s.SHOW_DEPLOYS)), 'pool_size')}`.",
        f"- Pool sample: `{output_of(t, bash(s.SAMPLE_POOL))}`: every connection busy, requests "
        "waiting.",
    ]
    if t.steering():
        size = line_with(output_of(t, bash(s.SHOW_DB_CONFIG)), "pool_size:")
        lines.append(
            f"- As {t.steering()[0].user} asked, I checked the DB pool size: "
            f"`config/db.yaml` has `{size}`."
        )
    lines.append(f"- Still happening: `{output_of(t, bash(s.SAMPLE_ERRORS))}`.")
    if t.told(SANDBOX_REPLACED):
        lines.append(
            "- My sandbox was replaced mid-investigation; I re-ran the interrupted command "
            "in the new one."
        )
    if t.announced(s.DB_NOTE_PATH):
        lines.append(f"- The other thread checked the database side ({s.DB_NOTE_PATH}).")
    lines += past_incident(t)
    lines += [
        "",
        "*Next:* roll back v2.14.0, or set `pool_size` back to 20.",
        f"Notes: `{s.FINDINGS_PATH}`. Lesson saved to `{s.MEMORY_PATH}`.",
    ]
    return "\n".join(lines)


def past_incident(t: Transcript) -> list[str]:
    """The line citing the past incident the session was given and read (none otherwise)."""
    summary = output_of(t, read(s.PAST_SUMMARY_PATH))
    if not t.ran(read(s.PAST_SUMMARY_PATH)):
        return []
    fix = line_with(summary, "- Fix:").removeprefix("- Fix:").strip()
    return [
        f"- Seen before: the incident of {s.PAST_AT:%Y-%m-%d} in <#{s.PAST_CHANNEL}> had the "
        f"same cause (`{s.PAST_SUMMARY_PATH}`); what fixed it then: {fix}."
    ]


# ----- bob: the parallel thread -------------------------------------------------------


def sees_findings(t: Transcript) -> bool:
    """Whether the session knows of alice's notes (first-message index or a reminder)."""
    return t.listed(NOTES_INDEX, s.FINDINGS_PATH) or t.announced(s.FINDINGS_PATH)


def bob_plan(t: Transcript) -> list[Step]:
    """The database side; keep sampling until the other thread's notes appear."""
    seen = sees_findings(t)
    return [
        Step(
            "Planning the database check.",
            todos(
                ("Check orders-db health", "in_progress", "Checking orders-db"),
                ("Compare with the other thread's notes", "pending", "Comparing notes"),
            ),
        ),
        Step("Reading the database's log.", bash(s.TAIL_DB_LOG)),
        Step(
            "Sampling the database's connections.",
            bash(s.SAMPLE_DB),
            times=1 if seen else MAX_DB_SAMPLES,
        ),
        Step("The other thread wrote notes; reading them.", read(s.FINDINGS_PATH), wanted=seen),
        Step("Recording the database side.", write(s.DB_NOTE_PATH, db_note(t))),
    ]


def db_note(t: Transcript) -> str:
    """Bob's incident note."""
    return (
        "# orders-db during the checkout-api 500s\n\n"
        f"- {output_of(t, bash(s.SAMPLE_DB))}\n"
        "- the database is healthy: the bottleneck is checkout-api's own connection pool\n"
    )


def bob_answer(t: Transcript) -> str:
    """Bob's answer, building on alice's notes when it saw them."""
    lines = [
        "*orders-db itself is healthy.*",
        "",
        f"- `{s.SAMPLE_DB}` → `{output_of(t, bash(s.SAMPLE_DB))}`",
        f"- `{s.TAIL_DB_LOG}`: no errors, 31 of 500 connections in use.",
    ]
    notes = output_of(t, read(s.FINDINGS_PATH))
    if t.ran(read(s.FINDINGS_PATH)):
        cause = line_with(notes, "Suspected cause") or notes.splitlines()[0]
        lines.append(
            f"- The other thread's notes (`{s.FINDINGS_PATH}`, written while I worked): "
            f"{cause.lstrip('- ')} So the 500s come from checkout-api's pool, not the database."
        )
    lines.append(f"Noted in `{s.DB_NOTE_PATH}`.")
    return "\n".join(lines)


# ----- dave: the next incident --------------------------------------------------------


def dave_plan(t: Transcript) -> list[Step]:
    """Check the status page through MCP when offered; read what org memory says about
    checkout-api, if it lists anything."""
    listed = t.listed(MEMORY_INDEX, s.MEMORY_PATH)
    return [
        mcp_scene.status_step(t),
        Step("Org memory has a note on this.", read(s.MEMORY_PATH), wanted=listed),
    ]


def dave_answer(t: Transcript) -> str:
    """What memory says, or that it says nothing."""
    status = "".join(f"{line}\n" for line in mcp_scene.status_line(t))
    if not t.ran(read(s.MEMORY_PATH)):
        return status + "Org memory has nothing about checkout-api's 500s yet."
    note = output_of(t, read(s.MEMORY_PATH))
    quoted = "\n".join(f"> {line}" for line in note.splitlines())
    return f"{status}From org memory (`{s.MEMORY_PATH}`, written in an earlier incident):\n{quoted}"
