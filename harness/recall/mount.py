"""``/incidents``: the org's past incidents as a read-only tree, through Read, Glob and Grep
(docs/architecture.md §17).

``/incidents/<YYYY-MM-DD>-<channel>/`` holds one incident's notes (its ``/incident/`` files:
``summary.md``, ``postmortem.md``, findings…) and two files made on each read:
``timeline.md`` (its timeline, as ``/incident/timeline.md`` shows it to that channel) and
``answers.md`` (its sessions' answers, in full). Only incidents the session may see are
there (``Recall.viewer``: the org's, and a private channel's only from that channel unless
the org allows it); any other folder does not exist. Write and Edit are refused
(``files._refuse_write``); Bash never sees the tree (the guard refuses it, the jail holds a
stub).
"""

from __future__ import annotations

import json

from harness.recall.related import GENERATED, MOUNT_ROOT, Recall
from harness.tools import bounds, ripgrep, search_output, wording
from harness.tools.contract import ToolContext, ToolOutcome, tool_error
from harness.tools.listing import page
from harness.tools.virtual_dir import list_directory
from harness.vfs import Mount, Resolved
from memory_store import (
    FileMatches,
    FileNotFound,
    IncidentLog,
    Namespace,
    PastIncident,
    Scope,
    SearchTimeout,
)

TIMED_OUT = "The search timed out; search a narrower path or use a more specific pattern."
ROOT_LIST_MAX = 200
"""Folders the root's listing shows (newest first); Glob and Grep reach the others."""
NOT_SERVED = (
    "Past incidents (/incidents/) are not available in this session. Use /incident/ for this "
    "incident's notes and /memory/ for the org's lessons."
)


def _split(where: Resolved) -> tuple[str | None, str]:
    """(folder, path inside it) of a ``/incidents`` path."""
    parts = where.path.strip("/").split("/", 1)
    if not parts[0]:
        return None, "/"
    return parts[0], "/" + (parts[1] if len(parts) > 1 else "")


async def read(
    ctx: ToolContext, where: Resolved, offset: int | None, limit: int | None, allow_large: bool
) -> ToolOutcome:
    """Read a file or list a folder of ``/incidents``."""
    recall = ctx.recall
    if recall is None:
        return tool_error(NOT_SERVED)
    viewer = recall.viewer(ctx.org_id, ctx.channel_id)
    folder, inner = _split(where)
    if folder is None:
        return await _list_root(recall, ctx)
    incident = await recall.store.incident(viewer, folder)
    if incident is None:
        return ToolOutcome(wording.file_missing(ctx.cwd), is_error=True)
    notes = Namespace(ctx.org_id, Scope.INCIDENT, incident.channel_id)
    shown = f"{MOUNT_ROOT}/{folder}" + ("" if inner == "/" else inner)
    generated = GENERATED if recall.record is not None else ()
    if inner == "/":
        inner_where = Resolved(Mount.INCIDENT, "/")
        return await list_directory(ctx.store, notes, inner_where, generated, shown=shown)
    name = inner.lstrip("/")
    if name in generated:
        content = await _generated(recall, incident, name)
        return ToolOutcome(page(content, offset, limit).text)
    try:
        current = await ctx.store.read(notes, inner)
    except FileNotFound:
        return await list_directory(
            ctx.store,
            notes,
            Resolved(Mount.INCIDENT, inner),
            missing=wording.file_missing(ctx.cwd),
            shown=shown,
        )
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    size_bytes = len(current.content.encode())
    if offset is None and limit is None and size_bytes > bounds.MAX_READ_BYTES and not allow_large:
        return ToolOutcome(bounds.file_too_large(size_bytes), is_error=True)
    return ToolOutcome(page(current.content, offset, limit).text)


async def _list_root(recall: Recall, ctx: ToolContext) -> ToolOutcome:
    incidents = await recall.store.incidents(recall.viewer(ctx.org_id, ctx.channel_id))
    if not incidents:
        return ToolOutcome(f"{MOUNT_ROOT}/ is an empty directory (no past incident recorded yet).")
    noun = "entry" if len(incidents) == 1 else "entries"
    lines = [f"{MOUNT_ROOT}/ is a directory with {len(incidents)} {noun} (newest first):"]
    for incident in incidents[:ROOT_LIST_MAX]:
        title = incident.summary.title or "(untitled)"
        lines.append(f"- {incident.dir_name}/ ({title})")
    if len(incidents) > ROOT_LIST_MAX:
        rest = len(incidents) - ROOT_LIST_MAX
        lines.append(f"- … and {rest} more: use Grep or Glob on {MOUNT_ROOT}/ to find them")
    return ToolOutcome("\n".join(lines))


async def _generated(recall: Recall, incident: PastIncident, name: str) -> str:
    """``timeline.md`` or ``answers.md`` of a past incident, made now."""
    assert recall.record is not None
    if name == "timeline.md":
        return await recall.record.timeline_markdown(incident.org_id, incident.channel_id)
    return await answers_markdown(recall.record.log, incident)


async def answers_markdown(log: IncidentLog, incident: PastIncident) -> str:
    """Every answer the incident's sessions gave, in full, oldest first."""
    found = await log.rows(incident.org_id, incident.channel_id)
    threads = {s.id: s.thread_ts for s in found.sessions}
    parts = [f"# Answers of the incident in <#{incident.channel_id}>"]
    for row in found.rows:
        if row.source != "event" or row.kind != "answer":
            continue
        try:
            text = str(json.loads(row.text).get("text", ""))
        except (ValueError, AttributeError):
            continue
        thread = threads.get(row.session_id, "")
        parts.append(f"## {row.at:%Y-%m-%d %H:%M} UTC, thread {thread}\n\n{text.strip()}")
    if len(parts) == 1:
        parts.append("(no answer yet)")
    return "\n\n".join(parts) + "\n"


async def glob(ctx: ToolContext, where: Resolved, pattern: str) -> ToolOutcome:
    """Glob on ``/incidents`` (paths shown under ``/incidents``), oldest first."""
    recall = ctx.recall
    if recall is None:
        return tool_error(NOT_SERVED)
    viewer = recall.viewer(ctx.org_id, ctx.channel_id)
    folder, _ = _split(where)
    if folder is not None and await recall.store.incident(viewer, folder) is None:
        return ToolOutcome(ripgrep.missing_directory(where.display(), ctx.cwd), is_error=True)
    if "/" not in pattern:
        pattern = "**/" + pattern
    generated = GENERATED if recall.record is not None else ()
    try:
        entries = await recall.store.glob(viewer, pattern, where.path, generated=generated)
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    return ToolOutcome(search_output.glob_listing([MOUNT_ROOT + e.path for e in reversed(entries)]))


async def grep(
    ctx: ToolContext,
    where: Resolved,
    pattern: str,
    *,
    glob: str | None,
    ignore_case: bool,
    before: int,
    after: int,
    multiline: bool,
    newest_first: bool,
    timeout_s: float,
) -> list[FileMatches] | ToolOutcome:
    """Grep's matches on ``/incidents`` (paths relative to the mount), or an error."""
    recall = ctx.recall
    if recall is None:
        return tool_error(NOT_SERVED)
    viewer = recall.viewer(ctx.org_id, ctx.channel_id)
    folder, _ = _split(where)
    if folder is not None and await recall.store.incident(viewer, folder) is None:
        return ToolOutcome(ripgrep.missing_directory(where.display(), ctx.cwd), is_error=True)
    try:
        return await recall.store.grep(
            viewer,
            pattern,
            prefix=where.path,
            glob=glob,
            ignore_case=ignore_case,
            before=before,
            after=after,
            multiline=multiline,
            newest_first=newest_first,
            timeout_s=timeout_s,
        )
    except ValueError as exc:
        return tool_error(str(exc))
    except SearchTimeout:
        return tool_error(TIMED_OUT)
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
