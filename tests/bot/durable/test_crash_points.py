"""The crash-test hooks: the points reach the crasher, and only an answer's post reaches
``DURING_POST`` (its key or a later part of it), only while it is being posted."""

from __future__ import annotations

from bot.durable.crash_points import CrashHooks, CrashPoint, no_crash


class Recorder:
    def __init__(self) -> None:
        self.reached: list[tuple[CrashPoint, str, int, int]] = []

    def __call__(
        self, point_reached: CrashPoint, *, session_id: str, step: int, attempt: int
    ) -> None:
        self.reached.append((point_reached, session_id, step, attempt))


def test_a_point_reaches_the_crasher_with_the_step_it_belongs_to() -> None:
    recorder = Recorder()
    CrashHooks(recorder).reached(CrashPoint.AFTER_TOOL, session_id="s1", step=3, attempt=1)
    assert recorder.reached == [(CrashPoint.AFTER_TOOL, "s1", 3, 1)]


def test_during_post_is_reached_for_the_answer_and_its_parts_only_while_posting() -> None:
    recorder = Recorder()
    hooks = CrashHooks(recorder)
    hooks.before_post_recorded("s1:answer:4")  # not being posted: nothing
    with hooks.posting("s1:answer:4", session_id="s1", step=7, attempt=0):
        hooks.before_post_recorded("s1:status:2")  # a status message: ignored
        hooks.before_post_recorded("s1:answer:40")  # another answer whose key shares a prefix
        hooks.before_post_recorded("s1:answer:4")
        hooks.before_post_recorded("s1:answer:4/1")  # a long answer's second part
    hooks.before_post_recorded("s1:answer:4/2")  # after the post: nothing
    assert recorder.reached == [
        (CrashPoint.DURING_POST, "s1", 7, 0),
        (CrashPoint.DURING_POST, "s1", 7, 0),
    ]


def test_the_production_hooks_do_nothing() -> None:
    hooks = CrashHooks()
    assert hooks.crash is no_crash
    with hooks.posting("s1:answer:1", session_id="s1", step=1, attempt=0):
        hooks.before_post_recorded("s1:answer:1")
    hooks.reached(CrashPoint.AFTER_COMMIT, session_id="s1", step=1, attempt=0)
