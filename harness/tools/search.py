"""Glob and Grep: Claude Code's search tools over every mount.

Virtual mounts are searched by the ``FileStore``; sandbox paths by ripgrep inside
the sandbox (``ripgrep``). Output is formatted by ``search_output`` either way.

Where the virtual mounts differ from ripgrep:
  * Grep's regex is RE2 (linear time, run off the event loop with a timeout): the
    syntax of ripgrep's default engine, but ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are
    ASCII-only and class set operations (``[a-z&&[^x]]``) are refused.
  * ``type`` knows a short list of file types (see ``_TYPES``) instead of ripgrep's.
  * ``multiline`` reports a match spanning lines by its first line only.
Glob patterns follow ripgrep's rule on every mount: a pattern without ``/`` matches
the file name at any depth (``*.md`` finds ``/memory/teams/a.md``).
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import posixpath
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.recall import mount as past
from harness.tools import ripgrep, search_output, wording
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error
from harness.tools.files import generated_here
from harness.vfs import Mount, Resolved, resolve
from memory_store import FileMatches, SearchTimeout

SEARCH_TIMEOUT_S = 60.0
_FORMAT_ON_LOOP_LINES = 2_000
"""A content listing of more lines is formatted off the event loop (40,000: ~8 ms)."""
TIMED_OUT = "The search timed out; search a narrower path or use a more specific pattern."
_GLOB_CHARS = frozenset("*?[{")
_TYPES: dict[str, tuple[str, ...]] = {
    "md": (".md", ".markdown"),
    "markdown": (".md", ".markdown"),
    "txt": (".txt",),
    "yaml": (".yaml", ".yml"),
    "json": (".json",),
    "toml": (".toml",),
    "py": (".py", ".pyi"),
    "sh": (".sh", ".bash"),
    "sql": (".sql",),
    "go": (".go",),
    "js": (".js", ".mjs", ".cjs"),
    "ts": (".ts", ".tsx"),
    "csv": (".csv",),
    "log": (".log",),
}


class GlobInput(BaseModel):
    """Glob's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pattern: str
    path: str | None = None


class GrepInput(BaseModel):
    """Grep's parameters (Claude Code's names; ``-i``, ``-n``, ``-A``… are aliases)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pattern: str
    path: str | None = None
    glob: str | None = None
    type: str | None = None
    output_mode: Literal["content", "files_with_matches", "count"] = "files_with_matches"
    ignore_case: bool = Field(default=False, alias="-i")
    line_numbers: bool = Field(default=True, alias="-n")
    after: int | None = Field(default=None, alias="-A", ge=0)
    before: int | None = Field(default=None, alias="-B", ge=0)
    context: int | None = Field(default=None, alias="-C", ge=0)
    context_long: int | None = Field(default=None, alias="context", ge=0)
    """Claude Code's other name of ``-C``."""
    only_matching: bool = Field(default=False, alias="-o")
    head_limit: int = Field(default=250, ge=0)
    offset: int = Field(default=0, ge=0)
    multiline: bool = False

    def context_lines(self) -> tuple[int, int]:
        """(before, after) for content mode; ``-A``/``-B`` override ``-C``."""
        if self.output_mode != "content":
            return 0, 0
        around = self.context if self.context is not None else (self.context_long or 0)
        return (
            self.before if self.before is not None else around,
            self.after if self.after is not None else around,
        )


# ---------------------------------------------------------------- Glob


async def glob(p: GlobInput, ctx: ToolContext) -> ToolOutcome:
    """Files matching a glob pattern, oldest modification first (Claude Code 2.1.332)."""
    root, pattern = split_pattern(p.pattern, ctx.absolute(p.path) if p.path else ctx.cwd)
    where = resolve(root)
    if not where.is_virtual:
        result = await ctx.workspace.exec(
            ctx.tool_use_id, ripgrep.files_command(pattern, where.path), timeout_s=SEARCH_TIMEOUT_S
        )
        paths = ripgrep.parse_files(result.stdout)
        problem = ripgrep.failure(result, where.path, produced=bool(paths), cwd=ctx.cwd)
        if problem is not None:
            return _failed(problem)
        return ToolOutcome(search_output.glob_listing(paths[::-1]))
    if where.mount is Mount.INCIDENTS:
        return await past.glob(ctx, where, pattern)
    if "/" not in pattern:
        pattern = "**/" + pattern
    try:
        # every match: the listing shows the oldest 100 and counts them all (the store
        # orders newest first, so a limit there would keep the wrong end)
        entries = await ctx.store.glob(ctx.namespace(where.mount), pattern, where.path)
        if not entries and not await _exists(ctx, where):
            missing = ripgrep.missing_directory(where.display(), ctx.cwd)
            return ToolOutcome(missing, is_error=True)
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    oldest_first = [_shown(where, e.path) for e in reversed(entries)]
    generated = [n for n in generated_here(where, ctx) if _glob_matches(pattern, n)]
    oldest_first += [_shown(where, "/" + name) for name in generated]  # made now: newest
    return ToolOutcome(search_output.glob_listing(oldest_first))


async def _exists(ctx: ToolContext, where: Resolved) -> bool:
    """Whether a virtual directory holds anything (a mount root always exists)."""
    if where.path == "/":
        return True
    return bool(await ctx.store.listdir(ctx.namespace(where.mount), where.path))


def _failed(problem: ripgrep.Failure) -> ToolOutcome:
    if problem.wrapped:
        return tool_error(problem.text)
    return ToolOutcome(problem.text, is_error=True)


def _glob_matches(pattern: str, name: str) -> bool:
    """Whether a file ``name`` at the searched directory's top matches ``pattern``
    (``**/`` also matches no directory at all)."""
    return fnmatch.fnmatchcase(name, pattern) or (
        pattern.startswith("**/") and fnmatch.fnmatchcase(name, pattern.removeprefix("**/"))
    )


def split_pattern(pattern: str, path: str) -> tuple[str, str]:
    """(directory to search, pattern relative to it); an absolute pattern names its root.

    >>> split_pattern("/memory/**/*.md", "/workspace")
    ('/memory', '**/*.md')
    >>> split_pattern("*.py", "/workspace")
    ('/workspace', '*.py')
    >>> split_pattern("/incident/timeline.md", "/ignored")
    ('/incident', 'timeline.md')
    """
    if not pattern.startswith("/"):
        return path, pattern
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if _GLOB_CHARS.intersection(part):
            return "/".join(parts[:i]) or "/", "/".join(parts[i:])
    return posixpath.dirname(pattern) or "/", posixpath.basename(pattern)


def _shown(where: Resolved, path: str) -> str:
    return Resolved(where.mount, path).display()


# ---------------------------------------------------------------- Grep


async def grep(p: GrepInput, ctx: ToolContext) -> ToolOutcome:
    """Search file contents for a regex; three output modes."""
    where = resolve(ctx.absolute(p.path) if p.path else ctx.cwd)
    if where.is_virtual:
        found = await _grep_virtual(p, where, ctx)
    else:
        found = await _grep_sandbox(p, where, ctx)
    if isinstance(found, ToolOutcome):
        return found
    files, paths = found
    prefix = _mount_root(where)
    if p.output_mode == "files_with_matches":
        shown = [prefix + path for path in paths]
        return ToolOutcome(search_output.files_listing(shown, p.head_limit, p.offset))
    if p.output_mode == "count":
        return ToolOutcome(search_output.count_listing(files, p.head_limit, p.offset, prefix))
    if p.only_matching:
        files = only_matching(files, p.pattern, ignore_case=p.ignore_case)
    listing = functools.partial(
        search_output.content_listing,
        files,
        line_numbers=p.line_numbers,
        context=any(p.context_lines()),
        head_limit=p.head_limit,
        offset=p.offset,
        prefix=prefix,
    )
    if search_output.content_size(files) > _FORMAT_ON_LOOP_LINES:
        return ToolOutcome(await asyncio.to_thread(listing))
    return ToolOutcome(listing())


Found = tuple[list[FileMatches], list[str]] | ToolOutcome


def only_matching(
    files: list[FileMatches], pattern: str, *, ignore_case: bool
) -> list[FileMatches]:
    """``-o``: each match line replaced by the parts of it that match (one entry each,
    under the line's number), context lines kept whole (as ripgrep's ``-o -C``). The
    parts are found with Python's ``re`` (ripgrep's syntax is mostly the same); a pattern
    ``re`` cannot compile keeps its whole lines.

    >>> found = only_matching([FileMatches("/a", [1], ["x=1 y=22"])], r"\\d+", ignore_case=False)
    >>> found[0].line_numbers, found[0].lines
    ([1, 1], ['1', '22'])
    """
    try:
        regex: re.Pattern[str] | None = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error:
        regex = None
    kept: list[FileMatches] = []
    for found in files:
        numbers: list[int] = []
        parts: list[str] = []
        for n, line in zip(found.line_numbers, found.lines, strict=True):
            if n in found.context:
                numbers.append(n)
                parts.append(line)
                continue
            pieces = [] if regex is None else [m.group(0) for m in regex.finditer(line)]
            pieces = [piece for piece in pieces if piece] or [line]
            numbers += [n] * len(pieces)
            parts += pieces
        if numbers:
            kept.append(FileMatches(found.path, numbers, parts, found.context))
    return kept


def _enough(p: GrepInput) -> int | None:
    """How many entries content mode can show: ``offset + head_limit`` and one more (to
    know that some were left out); None when every match counts (the other modes, no
    limit, ``-o`` which makes a line several entries, a type filter applied after the search).
    Each entry is at least one line of the listing, so stopping there shows the same."""
    if p.output_mode != "content" or p.head_limit == 0 or p.only_matching or p.type is not None:
        return None
    return p.offset + p.head_limit + 1


def _mount_root(where: Resolved) -> str:
    """What to put before a mount-relative path to show it: ``/memory``, or "" (sandbox)."""
    return Resolved(where.mount, "/").display() if where.is_virtual else ""


async def _grep_virtual(p: GrepInput, where: Resolved, ctx: ToolContext) -> Found:
    """Matches (mount-relative paths) and the matching files, newest first."""
    if not p.multiline and ripgrep.refuses_newline(p.pattern):  # as ripgrep would
        return _failed(ripgrep.Failure(f"{ripgrep.REJECTED}\n{ripgrep.NEWLINE_REFUSED}", False))
    extensions = _TYPES.get(p.type) if p.type is not None else None
    if p.type is not None and extensions is None:
        known = ", ".join(sorted(_TYPES))
        return tool_error(f"Unknown file type {p.type!r} on {where.display()}; use one of {known}")
    before, after = p.context_lines()
    if where.mount is Mount.INCIDENTS:
        found = await past.grep(
            ctx,
            where,
            p.pattern,
            glob=p.glob,
            ignore_case=p.ignore_case,
            before=before,
            after=after,
            multiline=p.multiline,
            newest_first=p.output_mode == "files_with_matches",
            timeout_s=SEARCH_TIMEOUT_S,
        )
        if isinstance(found, ToolOutcome):
            return found
        files = [f for f in found if extensions is None or f.path.endswith(extensions)]
        return files, search_output.matched_paths(files)
    ns = ctx.namespace(where.mount)
    try:
        files = await ctx.store.grep(
            ns,
            p.pattern,
            prefix=where.path,
            glob=p.glob,
            ignore_case=p.ignore_case,
            before=before,
            after=after,
            multiline=p.multiline,
            newest_first=p.output_mode == "files_with_matches",
            enough=_enough(p),
        )
    except ValueError as exc:
        return tool_error(str(exc))
    except SearchTimeout:
        return tool_error(TIMED_OUT)
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    if extensions is not None:
        files = [f for f in files if f.path.endswith(extensions)]
    files_mode = p.output_mode == "files_with_matches"  # the only mode that lists paths
    return files, search_output.matched_paths(files) if files_mode else []


async def _grep_sandbox(p: GrepInput, where: Resolved, ctx: ToolContext) -> Found:
    """ripgrep in the sandbox: matching files newest first, or lines in path order."""
    before, after = p.context_lines()
    options = ripgrep.GrepOptions(
        glob=p.glob,
        type=p.type,
        ignore_case=p.ignore_case,
        before=before,
        after=after,
        multiline=p.multiline,
    )
    files_mode = p.output_mode == "files_with_matches"
    if files_mode:
        command = ripgrep.matching_files_command(p.pattern, where.path, options)
    else:
        command = ripgrep.grep_command(p.pattern, where.path, options)
    result = await ctx.workspace.exec(ctx.tool_use_id, command, timeout_s=SEARCH_TIMEOUT_S)
    files = [] if files_mode else ripgrep.parse_json(result.stdout)
    paths = ripgrep.parse_files(result.stdout) if files_mode else []
    problem = ripgrep.failure(result, where.path, produced=bool(files or paths), cwd=ctx.cwd)
    if problem is not None:
        return _failed(problem)
    return files, paths or search_output.matched_paths(files)


# ---------------------------------------------------------------- definitions

GLOB = ModelTool(
    name="Glob",
    description=(
        "Find files by name with a glob pattern such as `**/*.py` or `src/**/*.{ts,tsx}`. "
        "Returns matching paths, least recently modified first (at most 100). Searches `path` "
        "(default: the working directory /workspace); give path /memory, /skills, /incident or "
        "/incidents (the org's past incidents, read-only), or an absolute pattern such as "
        "`/memory/**/*.md`, to search the shared virtual trees. A pattern without `/` "
        "matches file names at any depth."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob pattern to match."},
            "path": {
                "type": "string",
                "description": "Absolute directory to search in. Omit for /workspace.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    params=GlobInput,
    runner=glob,
)

GREP = ModelTool(
    name="Grep",
    description=(
        "Search file contents with a regular expression (ripgrep syntax; no look-around "
        "or backreferences). Searches `path` (a file or "
        "directory; default /workspace). Filter files with `glob` (e.g. `*.md`) or `type` "
        "(e.g. `py`). output_mode: `files_with_matches` (default; paths, newest first), "
        "`content` (matching lines as path:line:text; -n line numbers on by default, -A/-B/-C "
        "context lines) or `count` (matches per file). `-i` ignores case; `multiline` lets "
        "a match span lines. head_limit caps the output (default 250, 0 = no limit) and "
        "offset skips that many entries first, to page through long results; a paged result "
        "ends with a note giving the limit and offset. Lines over 500 characters are replaced "
        "by a marker; a result over 20000 characters is saved to a file you can Read. Use "
        "Grep rather than running grep or rg through Bash."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression to search for."},
            "path": {"type": "string", "description": "Absolute file or directory to search."},
            "glob": {"type": "string", "description": "Only files matching this glob."},
            "type": {"type": "string", "description": "Only files of this type (py, md, …)."},
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": "What to return (default files_with_matches).",
            },
            "-i": {"type": "boolean", "description": "Case-insensitive search."},
            "-n": {"type": "boolean", "description": "Line numbers (content mode; default on)."},
            "-A": {"type": "number", "minimum": 0, "description": "Lines after each match."},
            "-B": {"type": "number", "minimum": 0, "description": "Lines before each match."},
            "-C": {"type": "number", "minimum": 0, "description": "Lines around each match."},
            "context": {"type": "number", "minimum": 0, "description": "Same as -C."},
            "-o": {
                "type": "boolean",
                "description": "Content mode: show only the matching part of each line.",
            },
            "head_limit": {
                "type": "number",
                "minimum": 0,
                "description": "Show at most this many lines/files/counts (default 250; 0 = all).",
            },
            "offset": {
                "type": "number",
                "minimum": 0,
                "description": "Skip this many lines/files/counts before head_limit (default 0).",
            },
            "multiline": {
                "type": "boolean",
                "description": "Let `.` match newlines and patterns span lines (default false).",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    params=GrepInput,
    runner=grep,
)
