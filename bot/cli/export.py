"""``warroom export-incident CHANNEL``: an incident's record as files, for an incident tool.

Writes, under ``OUT/<channel>/`` (``OUT/<channel>-<thread>/`` for one thread):

- ``timeline.md`` and ``timeline.json``: the timeline (§15), as ``/agent timeline`` shows it;
- ``notes/…``: every ``/incident/`` file of the channel as it stands (``postmortem.md``
  included), and ``notes.json`` (path, version, last change, who, content);
- ``postmortem.json``: the draft, with its citations checked against the timeline (null
  when there is none);
- ``incident.json``: all of it in one document.

Permalinks need the workspace URL, read from ``auth.test`` when a bot token is set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from harness import (
    POSTMORTEM_PATH,
    IncidentRecord,
    Timeline,
    citations,
    timeline_json,
    timeline_markdown,
)
from memory_store import Database, FileStore, IncidentLog, Namespace, Scope

NOTES_ROOT = "/incident"


@dataclass(frozen=True)
class Exported:
    """Where the export went and what it holds."""

    directory: Path
    entries: int
    notes: int
    postmortem: bool


class NoIncident(LookupError):
    """Nothing of an incident is recorded in that channel (and thread) of that org: no
    session, message, command or note. Raised before anything is written."""


async def export_incident(
    db: Database,
    org_id: str,
    channel_id: str,
    out: Path,
    *,
    thread_ts: str | None = None,
    workspace_url: str | None = None,
) -> Exported:
    """Write the incident's record under ``out`` (see the module docstring).

    Raises:
        NoIncident: nothing is recorded there (a wrong channel id or org, most likely).
        OSError: a file could not be written.
        DatabaseUnavailable: the database could not be read.
    """
    record = IncidentRecord(IncidentLog(db), workspace_url)
    timeline = await record.timeline(org_id, channel_id, thread_ts=thread_ts)
    notes = await _notes(FileStore(db), Namespace(org_id, Scope.INCIDENT, channel_id))
    if not timeline.entries and not notes:
        where = channel_id if thread_ts is None else f"{channel_id}, thread {thread_ts},"
        raise NoIncident(
            f"nothing is recorded in {where} of org {org_id}: no session, message or note "
            "(check the channel id and --org; `warroom drill --keep` prints its incident's)"
        )
    name = channel_id if thread_ts is None else f"{channel_id}-{thread_ts}"
    directory = out / _safe(name)
    now = datetime.now(UTC)
    draft = next((n for n in notes if n["path"] == POSTMORTEM_PATH), None)
    postmortem = None if draft is None else _postmortem(draft, timeline)
    files = {
        "timeline.md": timeline_markdown(timeline, generated_at=now),
        "timeline.json": timeline_json(timeline),
        "notes.json": _json(notes),
        "postmortem.json": _json(postmortem),
        "incident.json": _json(
            {
                "org_id": org_id,
                "channel_id": channel_id,
                "thread_ts": thread_ts,
                "exported_at": now.isoformat(),
                "timeline": json.loads(timeline_json(timeline)),
                "notes": notes,
                "postmortem": postmortem,
            }
        ),
    }
    for note in notes:
        inside = PurePosixPath(note["path"]).relative_to(NOTES_ROOT)
        files[str(PurePosixPath("notes") / inside)] = note["content"]
    for relative, text in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return Exported(directory, len(timeline.entries), len(notes), draft is not None)


async def _notes(store: FileStore, ns: Namespace) -> list[dict[str, Any]]:
    found = []
    for entry in sorted(await store.glob(ns, "**", "/"), key=lambda e: e.path):
        if entry.is_dir:
            continue
        current = await store.read(ns, entry.path)
        found.append(
            {
                "path": f"{NOTES_ROOT}{current.path}",
                "version": current.version,
                "updated_at": current.updated_at.isoformat(),
                "actor": current.actor,
                "session_id": current.session_id,
                "content": current.content,
            }
        )
    return found


def _postmortem(draft: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    checked = citations(str(draft["content"]), timeline)
    return {
        **draft,
        "sections": list(checked.sections),
        "cited": sorted(checked.cited, key=lambda c: int(c[1:])),
        "missing": sorted(checked.missing, key=lambda c: int(c[1:])),
        "uncited_claims": list(checked.uncited),
        "sound": checked.sound,
    }


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _safe(name: str) -> str:
    """A directory name: Slack ids and ts values, anything else replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in name)
