"""Read, Write and Edit: Claude Code's file tools over every mount.

Virtual paths (``/memory``, ``/skills``, ``/incident``) go to the ``FileStore`` and
keep the session's read-state: Write and Edit refuse a file this session has not
read, Write refuses one changed since it last saw it (read, wrote, or was shown by a
change notice: one conditional write), Edit applies to the current content and says
when other lines changed (docs/architecture.md §6). Sandbox paths go to the
``Workspace`` (``sandbox_files``), with the same rules over content fingerprints.
A relative path is taken from the session's working directory.
"""

from __future__ import annotations

import posixpath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.loop.checkpoint import ReadRecord
from harness.loop.notices import contents_at
from harness.recall import mount as past
from harness.recall.summary import SUMMARY_PATH
from harness.record.incident import TIMELINE_PATH
from harness.tools import bounds, sandbox_files, wording
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error
from harness.tools.diff import numbered_diff
from harness.tools.listing import page
from harness.tools.roots import in_workspace
from harness.tools.virtual_dir import list_directory
from harness.vfs import Mount, Resolved, resolve
from memory_store import (
    AmbiguousMatch,
    FileExists,
    FileNotFound,
    NoChange,
    StaleVersion,
    StringNotFound,
)


class ReadInput(BaseModel):
    """Read's parameters (Claude Code's names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file_path: str
    offset: int | None = Field(default=None, ge=0)
    limit: int | None = Field(default=None, ge=1)
    pages: str | None = None
    allow_large: bool = False

    def window(self) -> sandbox_files.ReadWindow:
        """The part of the file to show."""
        return sandbox_files.ReadWindow(self.offset, self.limit, self.allow_large)


class WriteInput(BaseModel):
    """Write's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file_path: str
    content: str


class EditInput(BaseModel):
    """Edit's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file_path: str
    old_string: str
    new_string: str
    replace_all: bool = False


# ---------------------------------------------------------------- Read


async def read(p: ReadInput, ctx: ToolContext) -> ToolOutcome:
    """Numbered lines of a file; the entries of a virtual directory."""
    where = resolve(ctx.absolute(p.file_path))
    if p.pages is not None and not where.path.lower().endswith(".pdf"):
        return tool_error(
            f"pages is for PDF files, and {where.display()} is not one: use offset and limit."
        )
    if not where.is_virtual:
        return await sandbox_files.read(where.path, p.window(), ctx)
    if where.mount is Mount.INCIDENTS:
        return await past.read(ctx, where, p.offset, p.limit, p.allow_large)
    ns, shown = ctx.namespace(where.mount), where.display()
    if _is_timeline(where) and ctx.record is not None:
        return await _read_timeline(p, ctx)
    try:
        if where.path == "/":
            return await list_directory(ctx.store, ns, where, generated_here(where, ctx))
        current = await ctx.store.read(ns, where.path)
    except FileNotFound:
        return await list_directory(ctx.store, ns, where, missing=wording.file_missing(ctx.cwd))
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    size_bytes = len(current.content.encode())
    whole = p.offset is None and p.limit is None
    if whole and size_bytes > bounds.MAX_READ_BYTES and not p.allow_large:
        return ToolOutcome(bounds.file_too_large(size_bytes), is_error=True)
    window = page(current.content, p.offset, p.limit)  # the store's size cap bounds it
    record = _seen(ctx.read_state.get(shown), current.version)
    return ToolOutcome(window.text, read_updates={shown: record})


def _is_timeline(where: Resolved) -> bool:
    return where.mount is Mount.INCIDENT and where.path == TIMELINE_PATH


def generated_here(where: Resolved, ctx: ToolContext) -> tuple[str, ...]:
    """Names of the generated files directly in the virtual directory ``where``
    (``timeline.md`` at the root of ``/incident`` when the record is served)."""
    served = ctx.record is not None and where.mount is Mount.INCIDENT
    return (posixpath.basename(TIMELINE_PATH),) if served and where.path == "/" else ()


async def _read_timeline(p: ReadInput, ctx: ToolContext) -> ToolOutcome:
    """``/incident/timeline.md``: the incident's timeline, generated from the event log now."""
    assert ctx.record is not None
    content = await ctx.record.timeline_markdown(ctx.org_id, ctx.channel_id)
    return ToolOutcome(page(content, p.offset, p.limit).text)


def _seen(previous: ReadRecord | None, version: int) -> ReadRecord:
    """The read-state after showing ``version``: any read counts (Claude Code 2.1.336
    lets Write follow a partial read)."""
    notified = max(version, previous.notified_version if previous else 0)
    return ReadRecord(version=version, full=True, notified_version=notified)


# ---------------------------------------------------------------- Write


async def write(p: WriteInput, ctx: ToolContext) -> ToolOutcome:
    """Create or overwrite a file; on virtual mounts only over the version last read."""
    where = resolve(ctx.absolute(p.file_path))
    if not where.is_virtual:
        return await sandbox_files.write(where.path, p.content, ctx)
    refusal = _refuse_write(where, ctx)
    if refusal is not None:
        return refusal
    shown = where.display()
    record = ctx.read_state.get(shown)
    if record is not None and not record.full:
        return tool_error(wording.PARTIALLY_READ)
    try:
        result = await ctx.store.write(
            ctx.namespace(where.mount),
            where.path,
            p.content,
            ctx.origin(),
            expected_version=_last_seen(record),
        )
    except StaleVersion as exc:
        return _stale_write(where, ctx, exc, record)
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    await _reindexed(where, ctx)
    text = wording.created(shown) if result.created else wording.updated(shown)
    return ToolOutcome(text, read_updates={shown: _written(result.version)})


def _last_seen(record: ReadRecord | None) -> int:
    """The version whose content the model has seen: read, written, or shown by a change
    notice (Claude Code lets Write replace a file once a notice showed its change)."""
    if record is None or record.version == 0:
        return 0
    return max(record.version, record.notified_version)


def _stale_write(
    where: Resolved, ctx: ToolContext, exc: StaleVersion, record: ReadRecord | None
) -> ToolOutcome:
    """Write lost the version check (the store already said "unchanged" when the content
    was there): never read → "not read yet"; else "modified since read" and by whom."""
    if record is None:
        return tool_error(wording.NOT_READ)
    who = wording.author(exc.changed_by_actor, exc.changed_by_session, ctx.session_id)
    return tool_error(wording.modified_since_read(exc.current_version, who))


def _written(version: int) -> ReadRecord:
    return ReadRecord(version=version, full=True, notified_version=version)


async def _reindexed(where: Resolved, ctx: ToolContext) -> None:
    """After a change of ``/incident/summary.md``: index it, so later incidents find this
    one as it now reads (a person's correction included)."""
    if ctx.recall is not None and where.mount is Mount.INCIDENT and where.path == SUMMARY_PATH:
        await ctx.recall.reindex(ctx.store, ctx.org_id, ctx.channel_id)


def _refuse_write(where: Resolved, ctx: ToolContext) -> ToolOutcome | None:
    if where.mount is Mount.INCIDENTS:
        return tool_error(
            f"{where.display()} is a past incident of this org, and /incidents/ is read-only. "
            "Write this incident's notes under /incident/ and lasting lessons under /memory/ "
            "(to correct a past incident's summary, ask in its channel)."
        )
    if where.path == "/":
        return tool_error(f"{where.display()} is a directory; give the path of a file in it.")
    if where.mount is Mount.SKILLS and not ctx.agent_may_write_skills:
        return tool_error(wording.skills_read_only(where.display()))
    if _is_timeline(where):
        return tool_error(
            f"{where.display()} is generated from the incident's event log each time it is "
            "read, and is read-only. Write your notes to another file under /incident/ "
            "(e.g. /incident/postmortem.md) and cite its entries as [T<n>]."
        )
    return None


# ---------------------------------------------------------------- Edit


async def edit(p: EditInput, ctx: ToolContext) -> ToolOutcome:
    """Replace an exact string in a file, against its current content."""
    if p.old_string == p.new_string:
        return tool_error(wording.NO_CHANGES)
    where = resolve(ctx.absolute(p.file_path))
    if not where.is_virtual:
        return await sandbox_files.edit(where.path, p.old_string, p.new_string, p.replace_all, ctx)
    refusal = _refuse_write(where, ctx)
    if refusal is not None:
        return refusal
    try:
        return await _edit_virtual(p, where, ctx)
    except FileNotFound:
        return tool_error(wording.file_missing(ctx.cwd))
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))


async def recover_edit(p: EditInput, ctx: ToolContext) -> ToolOutcome | None:
    """After a crash: a virtual edit is redone (the store makes a repeated ``tool_use_id``
    a no-op), and so is one the tool refuses before touching anything (a path outside
    the roots); a sandbox edit cannot be told apart from a fresh one, so it is unknown."""
    where = resolve(ctx.absolute(p.file_path))
    if not where.is_virtual and in_workspace(where.path):
        return None
    return await edit(p, ctx)


async def _edit_virtual(p: EditInput, where: Resolved, ctx: ToolContext) -> ToolOutcome:
    ns, shown = ctx.namespace(where.mount), where.display()
    record = ctx.read_state.get(shown)
    if record is None and p.old_string:
        await ctx.store.read(ns, where.path)  # FileNotFound → "File does not exist."
        return tool_error(wording.NOT_READ)
    seen = record.version if record else None
    try:
        result = await ctx.store.edit(
            ns,
            where.path,
            p.old_string,
            p.new_string,
            ctx.origin(),
            replace_all=p.replace_all,
            seen_version=seen,
        )
    except NoChange:
        return tool_error(wording.NO_CHANGES)
    except FileExists:
        return tool_error(wording.ALREADY_EXISTS)
    except (StringNotFound, AmbiguousMatch) as exc:
        if exc.current_version != seen:
            return tool_error(wording.modified_since_read(exc.current_version))
        if isinstance(exc, AmbiguousMatch):
            return tool_error(wording.ambiguous(exc.count, p.old_string))
        return tool_error(wording.string_not_found(p.old_string))
    await _reindexed(where, ctx)
    if p.old_string == "":  # created the file, or filled an empty one (Claude Code's words)
        return ToolOutcome(wording.updated(shown), read_updates={shown: _written(result.version)})
    text = wording.edited(shown, p.replace_all, current=not result.concurrent_change)
    told = record is not None and record.notified_version >= result.base_version
    if result.concurrent_change and seen is not None and not told:
        text += "\n\n" + await _concurrent_note(ctx, where, seen, result.base_version)
    updated = ReadRecord(
        version=result.version,
        full=record is None or record.full,
        notified_version=result.version,
    )
    return ToolOutcome(text, read_updates={shown: updated})


async def _concurrent_note(ctx: ToolContext, where: Resolved, seen: int, base: int) -> str:
    ns = ctx.namespace(where.mount)
    before, after = await contents_at(ctx.store, ns, where.path, (seen, base))
    note = "Another session changed this file after you read it; those changes are kept."
    if before is None or after is None:
        return note
    return f"{note} Their changes, from the version you read (v{seen}) to v{base}:\n" + (
        numbered_diff(before, after, max_lines=60)
    )


# ---------------------------------------------------------------- definitions


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


READ = ModelTool(
    name="Read",
    description=(
        "Read a file and return its lines numbered like `cat -n`: each line is the line "
        "number, a tab, then the file's text. Reads files under /workspace (the sandbox's "
        "working directory), the shared virtual trees /memory/, /skills/ and /incident/, and "
        "the org's past incidents under /incidents/ (read-only); "
        "for other files of the sandbox (/etc, /tmp, ...) use Bash. "
        "Returns the whole file by default; use offset (first line, 1-based) and limit "
        "(number of lines) to read part of a long one. A relative path is taken from the "
        "working directory (where Bash's `cd` left it). A whole file over "
        f"{bounds.MAX_READ_BYTES // 1024} KB is refused: read it in parts with offset and "
        "limit, or search it with Grep (allow_large reads it anyway, as much as fits). "
        "Reading a directory under /memory/, /skills/, /incident/ or /incidents/ lists its "
        "entries. Read a "
        "file before you change it with Write or Edit."
    ),
    input_schema=_schema(
        {
            "file_path": {"type": "string", "description": "Absolute path of the file to read."},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Line number to start from (1-based). Only for long files.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to read. Only for long files.",
            },
            "pages": {
                "type": "string",
                "description": "Page range of a PDF file (for example 1-5). PDF files only.",
            },
            "allow_large": {
                "type": "boolean",
                "description": "Read a file over the size cap anyway, as much as fits.",
            },
        },
        ["file_path"],
    ),
    params=ReadInput,
    runner=read,
)

WRITE = ModelTool(
    name="Write",
    description=(
        "Create a file, or replace a file's whole content. Parent directories are created. "
        "Works under /workspace and on the shared trees /memory/, /incident/ (and /skills/ "
        "where the org allows the agent to edit skills). An existing file must have been read "
        "in full in this session first, and the write is refused if the file changed since: "
        "then Read it again and merge. Prefer Edit for changing part of a file, so that "
        "concurrent edits by other sessions are kept."
    ),
    input_schema=_schema(
        {
            "file_path": {"type": "string", "description": "Absolute path of the file to write."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        ["file_path", "content"],
    ),
    params=WriteInput,
    runner=write,
)

EDIT = ModelTool(
    name="Edit",
    description=(
        "Replace an exact string in a file. old_string must match the file's text exactly, "
        "including whitespace and indentation; the line-number prefix that Read shows "
        "(number, tab) is not part of the file and must not appear in old_string or "
        "new_string. The edit fails if old_string is not found, or is found more than once "
        "and replace_all is false: then give more surrounding lines to make it unique, or set "
        "replace_all to replace every occurrence. An empty old_string creates a new file. "
        "Works under /workspace and on the shared trees. The file must have been read in this "
        "session first. On the shared trees the edit applies to the current content, so "
        "changes other sessions made to other lines are kept (you are told when that "
        "happened)."
    ),
    input_schema=_schema(
        {
            "file_path": {"type": "string", "description": "Absolute path of the file to edit."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {
                "type": "string",
                "description": "The text to replace it with (must differ from old_string).",
            },
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence of old_string (default false).",
            },
        },
        ["file_path", "old_string", "new_string"],
    ),
    params=EditInput,
    runner=edit,
    recoverer=recover_edit,
)
