"""The drill's first scene: the alert fires before anyone mentions the bot (issue #27).

erin makes ``#incident`` an alert channel (``/agent watch on``); Alertmanager's Slack
receiver posts ``[FIRING:1] HighErrorRate (checkout-api …)`` at the top of it; with no
mention, a session starts in that post's thread, its first input the alert as fenced
data (``bot.alerts.model.for_model``). Its scripted plan is short and read-only: the
playbook, the 500s, the deploys; its answer names the likely cause. At the end of the
drill Alertmanager posts ``[RESOLVED]``: it reaches the same session, which says whether
the resolve agrees with its hypothesis.
"""

from __future__ import annotations

from bot.drill import scenario as s
from bot.drill.steps import Step, bash, line_with, output_of, read
from bot.drill.transcript import Transcript

NAME = "alert"
SOURCE = "alertmanager"
OPENING = "An alert arrived (source: slack:alertmanager"
RESOLVED = "Resolved at"
SKILLS_INDEX = "Skills available"


def is_alert_session(t: Transcript) -> bool:
    """Whether the session was started by the scene's alert (its first input says so)."""
    return OPENING in t.opening and "HighErrorRate" in t.opening


def plan(t: Transcript) -> list[Step]:
    """The playbook (when listed), the 500s, the deploys."""
    return [
        Step(
            "An alert fired for checkout-api; the playbook covers its symptoms.",
            read(s.SKILL_PATH),
            wanted=t.listed(SKILLS_INDEX, s.SKILL_NAME),
        ),
        Step("Counting the 500s the alert is about.", bash(s.COUNT_500S)),
        Step("Checking the last deploys.", bash(s.SHOW_DEPLOYS)),
    ]


def answer(t: Transcript) -> str:
    """The first answer (the likely cause), or, once the resolve came, whether it agrees."""
    deploy = line_with(output_of(t, bash(s.SHOW_DEPLOYS)), "pool_size")
    if t.told(RESOLVED):
        return (
            "The resolve agrees with my hypothesis: the 500s stopped once the v2.14.0 deploy "
            "(which lowered the DB pool) was rolled back. Nothing left to check here."
        )
    return "\n".join(
        [
            "*HighErrorRate on checkout-api (from Alertmanager): likely the DB connection pool.*",
            "",
            f"- `{s.COUNT_500S}` → *{output_of(t, bash(s.COUNT_500S))}* requests answered 500, "
            "all since 14:02.",
            f"- The 14:02 deploy: `{deploy}`.",
            f"- The playbook `{s.SKILL_NAME}` covers this: sample the pool next.",
        ]
    )
