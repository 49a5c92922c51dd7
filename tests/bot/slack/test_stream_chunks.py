"""What a committed step adds to its turn's streamed message (``bot.slack.stream_chunks``)."""

from __future__ import annotations

from bot.slack.stream_chunks import step_chunks
from harness import Answered, Notice, NoticeTopic


def test_a_notice_the_answer_says_is_not_streamed_a_second_time() -> None:
    # Given a step that ends the turn with a rejected request: its notice is its answer
    said = "The model API refused this request (HTTP 400): the script ran out."
    other = "The sandbox was replaced: files outside /workspace were lost."

    # When its events are streamed
    chunks = step_chunks(
        [
            Notice(NoticeTopic.SANDBOX_REPLACED, other),
            Notice(NoticeTopic.MODEL_REJECTED, said),
            Answered(said, best_effort=True),
        ]
    )

    # Then only the notice the answer does not say is streamed (the answer is posted apart)
    assert [c["text"] for c in chunks] == [f"_{other}_\n\n"]
