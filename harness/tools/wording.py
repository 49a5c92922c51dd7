"""The sentences the file tools say to the model.

The quoted sentences are Claude Code's (docs/tools.md, recorded from Claude Code 1.0.128,
2.0.77 and 2.1.x): the model was trained on them and knows how to recover. Keep
them exact; add true detail only after them.
"""

from __future__ import annotations

from harness.vfs import Resolved
from memory_store import (
    CaseConflict,
    FileTooLarge,
    InvalidContent,
    InvalidPath,
    InvalidSkill,
    QuotaExceeded,
    StoreError,
)

NOT_READ = "File has not been read yet. Read it first before writing to it."
MODIFIED_SINCE_READ = (
    "File has been modified since read, either by the user or by a linter. "
    "Read it again before attempting to write it."
)
NOT_FOUND_IN_FILE = "String to replace not found in file."
NO_CHANGES = "No changes to make: old_string and new_string are exactly the same."
FILE_MISSING = "File does not exist."
ALREADY_EXISTS = "Cannot create new file - file already exists."
PARTIALLY_READ = (
    "File has not been read in full (only part of it was read, or it was read before the "
    "conversation was compacted). Read the whole file, without offset or limit, before "
    "writing to it."
)

# These error classes are the model's to fix; any other StoreError (the database is
# down) propagates so the step is retried.
MODEL_FIXABLE: tuple[type[StoreError], ...] = (
    InvalidPath,
    FileTooLarge,
    QuotaExceeded,
    InvalidSkill,
    InvalidContent,
)


def string_not_found(old_string: str) -> str:
    """Edit's no-match error (Claude Code wording)."""
    return f"{NOT_FOUND_IN_FILE}\nString: {old_string}"


def ambiguous(count: int, old_string: str) -> str:
    """Edit's several-matches error (Claude Code wording)."""
    return (
        f"Found {count} matches of the string to replace, but replace_all is false. "
        "To replace all occurrences, set replace_all to true. To replace only one occurrence, "
        f"please provide more context to uniquely identify the instance.\nString: {old_string}"
    )


def author(actor: str | None, session_id: str | None, own_session: str) -> str:
    """Who made a version, in words: ``this session``, ``another agent session (s-2)``, …"""
    if session_id is not None and session_id == own_session:
        return "this session (an earlier tool call)"
    if actor in (None, "agent"):
        return f"another agent session ({session_id})" if session_id else "another agent session"
    if actor == "cli":
        return "someone using the warroom CLI"
    return f"<@{actor}>" + (f" (session {session_id})" if session_id else "")


def modified_since_read(current_version: int, who: str | None = None) -> str:
    """The staleness sentence plus one true sentence on what happened."""
    if current_version == 0:
        detail = "It has been deleted since" + (f" by {who}." if who else ".")
    else:
        detail = f"It is now at version {current_version}" + (
            f", last changed by {who}." if who else "."
        )
    return f"{MODIFIED_SINCE_READ} {detail}"


def skills_read_only(display_path: str) -> str:
    """Refusal of an agent write under /skills when the org keeps skills human-edited."""
    return (
        f"Cannot write {display_path}: in this org, skills are edited by people, not by the "
        "agent. Humans edit skills in Slack with `/agent skills`. If this playbook needs a "
        "change, say what to change in your answer, or record the lesson under /memory/."
    )


def store_failure(exc: StoreError, where: Resolved) -> str:
    """A clear sentence for a store refusal the model can act on.

    The store names paths relative to the mount (``/Case.md``); every path in the
    sentence is shown as the model knows it (``/memory/Case.md``).
    """
    display_path = where.display()
    if isinstance(exc, CaseConflict):
        existing = Resolved(where.mount, exc.existing_path).display()
        return (
            f"Cannot use {display_path}: it differs only by letter case from the existing "
            f"file {existing}. Use that path instead."
        )
    if isinstance(exc, InvalidPath):
        return f"Invalid path {display_path}: {exc.reason}"
    if isinstance(exc, FileTooLarge):
        return (
            f"File is too large: {exc.size_bytes} bytes, the limit is {exc.limit_bytes} bytes. "
            "Keep shared files short, or split the content into several files."
        )
    if isinstance(exc, QuotaExceeded):
        return (
            f"The org's shared files are over their {exc.what} quota ({exc.used} of "
            f"{exc.limit}). Nothing was written; tell the people in the thread"
            + (f"{exc.note}." if exc.what == "stored bytes" else ".")
        )
    if isinstance(exc, InvalidContent):
        return f"Cannot store {display_path}: {exc.reason}. Nothing was written."
    if isinstance(exc, InvalidSkill):
        problems = "\n".join(f"- {p}" for p in exc.problems)
        return (
            f"Invalid skill file {display_path}; nothing was written. Fix its YAML "
            f"frontmatter:\n{problems}"
        )
    return str(exc)


def created(path: str) -> str:
    """Write's (and Edit's) confirmation for a new file (Claude Code 2.1.332)."""
    return f"File created successfully at: {path}"


def updated(path: str) -> str:
    """Write's confirmation for a replaced file (Claude Code 2.1.332)."""
    return f"The file {path} has been updated successfully."


def unchanged(path: str) -> str:
    """Write's confirmation when the file already had the content."""
    return f"The file {path} already has exactly this content; nothing changed."


STATE_CURRENT = " (file state is current in your context \u2014 no need to Read it back)"


def edited(path: str, replace_all: bool, *, current: bool = True) -> str:
    """Edit's confirmation (Claude Code 2.1.332's sentences); ``current`` False when the
    file holds changes the model has not seen (then no "state is current" note).

    >>> edited("/m/a.md", True)
    'The file /m/a.md has been updated. All occurrences were successfully replaced.'
    """
    if replace_all:
        return f"The file {path} has been updated. All occurrences were successfully replaced."
    return f"The file {path} has been updated successfully." + (STATE_CURRENT if current else "")
