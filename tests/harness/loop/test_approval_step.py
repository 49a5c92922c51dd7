"""The approval protocol of the loop (§13): gate, ask, settle, expire — pure steps, no model."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from harness import (
    APPROVAL_KIND,
    REJECTED,
    ApprovalDecision,
    ApprovalGate,
    ApprovalStatus,
    Checkpoint,
    Collaborators,
    Inbound,
    Message,
    Next,
    Requester,
    StepKind,
    TextBlock,
    ToolUseBlock,
    advance,
    approval_posted,
    input_sha256,
    next_kind,
    next_wake,
)
from harness.approvals.pending import expiry_note

NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)
RESTART = {"command": "kubectl rollout restart deploy/payments", "description": "Restart"}


def _deps() -> Collaborators:
    async def save(cp: Checkpoint, events: Any) -> None:
        raise AssertionError("nothing runs, so nothing is saved mid-step")

    unused = cast(Any, None)
    gate = ApprovalGate(timeout_s=600, clock=lambda: NOW)
    return Collaborators(unused, unused, unused, save, approvals=gate)


def _calling(name: str, tool_input: dict[str, Any]) -> Checkpoint:
    call = Message("assistant", (ToolUseBlock("toolu_1", name, tool_input),))
    return Checkpoint("s1", "T1", "C1", Requester("U1"), messages=(call,))


async def _asked() -> Checkpoint:
    result = await advance(_calling("Bash", RESTART), _deps())
    assert result.next is Next.CONTINUE
    return approval_posted(result.checkpoint, "1767225601.000300")


async def test_a_change_is_not_run_but_asked_for_bound_to_its_input() -> None:
    result = await advance(_calling("Bash", RESTART), _deps())

    approval = result.checkpoint.approval
    assert approval is not None
    assert approval.pending
    assert approval.action == RESTART["command"]
    assert approval.input_sha256 == input_sha256("Bash", RESTART)
    assert approval.expires_at == NOW + timedelta(seconds=600)
    assert result.checkpoint.pending_results == ()
    assert [e.kind for e in result.events] == ["approval_requested"]
    assert next_kind(result.checkpoint) is StepKind.ASK  # the durable layer posts it


async def test_a_posted_request_waits_and_wakes_at_its_expiry() -> None:
    cp = await _asked()

    assert next_kind(cp) is StepKind.WAIT
    assert next_wake(cp) == (NOW + timedelta(seconds=600), expiry_note("toolu_1"))
    assert Checkpoint.from_json(cp.to_json()) == cp
    assert Checkpoint.from_json(cp.state_json(), messages=cp.messages) == cp


async def test_a_reply_while_waiting_is_held_and_the_session_waits_on() -> None:
    cp = await _asked()
    reply = Inbound("U2", "hold on, checking the dashboards")

    result = await advance(cp, _deps(), (reply,))

    assert result.next is Next.WAIT
    assert result.checkpoint.pending_input == (reply,)
    assert result.checkpoint.approval is not None
    assert result.checkpoint.approval.pending


async def test_a_decision_for_another_call_or_input_is_dropped() -> None:
    cp = await _asked()
    approval = cp.approval
    assert approval is not None
    stale = [
        ApprovalDecision(True, "toolu_old", approval.input_sha256, "U2", NOW),
        ApprovalDecision(True, "toolu_1", "0" * 64, "U2", NOW),
    ]
    inbox = tuple(Inbound("", d.to_text(), kind=APPROVAL_KIND) for d in stale)

    result = await advance(cp, _deps(), inbox)

    assert result.next is Next.WAIT
    assert result.checkpoint.approval == approval
    assert result.checkpoint.pending_input == ()


async def test_a_denial_answers_the_call_with_claude_codes_rejection() -> None:
    cp = await _asked()
    assert cp.approval is not None
    denied = ApprovalDecision(False, "toolu_1", cp.approval.input_sha256, "U2", NOW)

    result = await advance(cp, _deps(), (Inbound("", denied.to_text(), kind=APPROVAL_KIND),))

    (answer,) = result.checkpoint.pending_results
    assert answer.is_error
    assert answer.content.startswith(REJECTED)
    assert "<@U2> denied it" in answer.content
    assert result.checkpoint.approval is not None
    assert result.checkpoint.approval.status is ApprovalStatus.DENIED
    assert [e.kind for e in result.events] == ["approval_decided"]
    assert next_kind(result.checkpoint) is StepKind.MODEL
    assert next_wake(result.checkpoint) is None


async def test_the_expiry_wake_up_denies_it_and_a_stale_one_is_not_given_to_the_model() -> None:
    cp = await _asked()
    old = Inbound("", expiry_note("toolu_gone"), kind="wake")
    due = Inbound("", expiry_note("toolu_1"), kind="wake")

    result = await advance(cp, _deps(), (old, due))

    (answer,) = result.checkpoint.pending_results
    assert answer.content.startswith(REJECTED)
    assert "expired" in answer.content
    assert result.checkpoint.pending_input == ()


async def test_an_approval_lets_exactly_that_input_through_the_gate() -> None:
    cp = await _asked()
    assert cp.approval is not None
    approve = ApprovalDecision(True, "toolu_1", cp.approval.input_sha256, "U2", NOW)
    result = await advance(cp, _deps(), (Inbound("", approve.to_text(), kind=APPROVAL_KIND),))
    assert result.checkpoint.pending_results == ()  # it runs at the next step
    assert next_kind(result.checkpoint) is StepKind.TOOL
    # The same id with another input is a new request, not the approved one
    changed = {**RESTART, "command": "kubectl delete deploy/payments"}
    other = replace(
        result.checkpoint,
        messages=(Message("assistant", (ToolUseBlock("toolu_1", "Bash", changed),)),),
    )
    again = await advance(other, _deps())
    assert again.checkpoint.approval is not None
    assert again.checkpoint.approval.pending
    assert again.checkpoint.approval.action == changed["command"]


async def test_a_blocked_command_is_answered_without_running() -> None:
    result = await advance(_calling("Bash", {"command": "kubectl get secret db -o yaml"}), _deps())

    (answer,) = result.checkpoint.pending_results
    assert answer.is_error
    assert "Blocked by the organisation's approval policy" in answer.content
    assert "credential dumping" in answer.content
    assert result.checkpoint.approval is None
    assert [e.kind for e in result.events] == ["tool_blocked"]


async def test_a_decision_that_comes_after_the_request_was_settled_is_dropped() -> None:
    cp = await _asked()
    assert cp.approval is not None
    expired = await advance(cp, _deps(), (Inbound("", expiry_note("toolu_1"), kind="wake"),))
    late = ApprovalDecision(True, "toolu_1", cp.approval.input_sha256, "U2", NOW)
    (rejection,) = expired.checkpoint.pending_results
    answered = (  # the model read the rejection and asked the humans: its turn ended
        Message("user", (rejection,)),
        Message("assistant", (TextBlock("Should I restart payments?"),)),
    )
    settled = replace(
        expired.checkpoint,
        pending_results=(),
        messages=(*expired.checkpoint.messages, *answered),
    )

    result = await advance(settled, _deps(), (Inbound("", late.to_text(), kind=APPROVAL_KIND),))

    assert result.next is Next.WAIT  # nothing for the model: the click lost the race
    assert result.checkpoint.pending_input == ()
    assert result.checkpoint.approval is not None
    assert result.checkpoint.approval.status is ApprovalStatus.EXPIRED
