"""How a Warroom result is compared with Claude Code's (the conformance kit's rules).

Three levels, each also requiring the same ``is_error``: ``exact`` (trailing
``<system-reminder>`` blocks removed: Claude Code appends token counts and notices
there), ``relaxed`` (also ``$W/`` removed: paths relative to the fixture) and
``normalised`` (also what legitimately differs: background task ids, where task output
and persisted results live, the skill's directory, the ``/workspace`` root and
``updated …`` stamps). The fixture directory is written ``$W`` on both sides.
"""

from __future__ import annotations

import re

_REMINDERS = re.compile(r"\n*<system-reminder>.*?</system-reminder>\n*", re.S)
_TOKENS_LEFT = re.compile(r"\n*<system-reminder>\n<total_tokens>.*?</system-reminder>\n*", re.S)


def exact(text: str) -> str:
    """``text`` without its ``<system-reminder>`` blocks (kept when it is nothing else,
    as for an empty file, less Claude Code's token count)."""
    body = _REMINDERS.sub("\n", text).strip("\n")
    return body or _TOKENS_LEFT.sub("", text).strip("\n")


def normalised(text: str) -> str:
    """``exact`` with the legitimate differences removed (see the module doc).

    >>> normalised("Output is being written to: /workspace/.warroom/tasks/b0123abcd.output.")
    'Output is being written to: <TASKS>/<ID>.output.'
    """
    s = exact(text)
    s = re.sub(r"/tmp/claude-\d+/[^ \n]*?/tasks/(\w+)\.output", r"<TASKS>/\1.output", s)
    s = re.sub(r"(\$W|/workspace)/\.warroom/tasks/(\w+)\.output", r"<TASKS>/\2.output", s)
    s = re.sub(r"\$HOME/\.claude/projects/[^ \n]*?/tool-results/[\w.-]+", "<RESULTFILE>", s)
    s = re.sub(r"(\$W|/workspace)/\.warroom/tool-results/[\w.-]+", "<RESULTFILE>", s)
    s = re.sub(r"\$W/\.claude/skills/([\w-]+)", r"<SKILLS>/\1", s).replace("/skills/", "<SKILLS>/")
    s = re.sub(r"\bb[0-9a-z]{8}\b", "<ID>", s)
    s = re.sub(r"updated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "updated <TS>", s)
    s = s.replace("/workspace/", "$W/").replace("/workspace", "$W")
    return s.replace("$W/", "")


def same(ours: str, ours_error: bool, theirs: str, theirs_error: bool) -> bool:
    """Whether two results agree once normalised (text and ``is_error``)."""
    return ours_error == theirs_error and normalised(ours) == normalised(theirs)
