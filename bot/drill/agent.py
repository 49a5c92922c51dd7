"""The drill's scripted model: a policy from a Messages API request to the next reply.

``IncidentPolicy`` is a callable script for ``FakeAnthropicAPI``. It reads the
request as the model would (``Transcript``): who asked (the first message's request
text), which tool calls came back, whether the skill index lists the playbook,
whether a reminder announced a new incident note or a replaced sandbox, whether a
teammate's message arrived. A session asked ``harness.postmortem_request()`` is
frank's ``@warroom postmortem`` (its plan: ``postmortem``). Each person's plan
(``roles``) is an ordered list of steps, each a tool call with Claude Code's name
and input plus the condition under which it applies; the reply is the first
applicable step not yet done, else the final Markdown answer built from the evidence.

It keeps no state: the same request always gets the same reply, so a request sent
again after a crash is answered the same way. A call whose outcome was lost (the
harness says it could not be recovered) does not count as done and is made again —
every command in the drill is read-only.
"""

from __future__ import annotations

from bot.drill import alert_scene, postmortem, roles
from bot.drill import scenario as s
from bot.drill.steps import first_due
from bot.drill.transcript import Transcript
from bot.fakes.anthropic_api import RecordedRequest, Reply
from harness import is_postmortem_request, postmortem_request


class IncidentPolicy:
    """The scripted model of the drill (see the module docstring).

    Attributes:
        seen: every request it answered, as transcripts, by the name of the person
            whose session made it ("" when no person of the scenario started it).
    """

    def __init__(self) -> None:
        self.seen: dict[str, list[Transcript]] = {}

    def __call__(self, request: RecordedRequest) -> Reply:
        """The reply to one request (recorded in ``seen``)."""
        t = Transcript.of(request)
        person = person_of(t)
        name = alert_scene.NAME if alert_scene.is_alert_session(t) else ""
        self.seen.setdefault(person.name if person else name, []).append(t)
        return reply_to(t)

    def requests_of(self, person: s.Person) -> list[Transcript]:
        """The requests ``person``'s sessions made so far, oldest first."""
        return list(self.seen.get(person.name, ()))

    def requests_named(self, name: str) -> list[Transcript]:
        """The requests of the sessions recorded under ``name`` (``alert_scene.NAME``)."""
        return list(self.seen.get(name, ()))


def reply_to(t: Transcript) -> Reply:
    """The next reply for a transcript: a planned tool call, or the final answer."""
    if alert_scene.is_alert_session(t):
        return first_due(t, alert_scene.plan(t)) or Reply.text(alert_scene.answer(t))
    person = person_of(t)
    if person is s.ALICE:
        return first_due(t, roles.alice_plan(t)) or Reply.text(roles.alice_answer(t))
    if person is s.BOB:
        return first_due(t, roles.bob_plan(t)) or Reply.text(roles.bob_answer(t))
    if person is s.DAVE:
        return first_due(t, roles.dave_plan(t)) or Reply.text(roles.dave_answer(t))
    if person is s.FRANK:
        return first_due(t, postmortem.plan(t)) or Reply.text(postmortem.answer(t))
    return Reply.text("(drill model) I only know the drill's incident.")


def person_of(t: Transcript) -> s.Person | None:
    """Who started the session, from the request text in its first message (``postmortem``
    alone is asked as ``postmortem_request()``, as the Slack edge does)."""
    return next((p for p in s.PEOPLE if asked(p) in t.request), None)


def asked(person: s.Person) -> str:
    """The request ``person``'s mention starts a session with."""
    return postmortem_request() if is_postmortem_request(person.text) else person.text
