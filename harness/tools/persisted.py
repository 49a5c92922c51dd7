"""A tool result too large for the context, kept in a sandbox file behind a preview.

Claude Code 2.1.332's form: the model gets ``<persisted-output>`` with the size, the
path of the file holding the whole text and the first 2 KB; it reads the rest with
Read (``offset``/``limit``) or Grep. The file lives in the session's sandbox under
``RESULTS_DIR``, named after the ``tool_use`` id, so a call redone after a crash
writes the same file. When the sandbox cannot take the file, the middle of the text
is cut instead and the result says so.
"""

from __future__ import annotations

import re

from harness.errors import WorkspaceError
from harness.sandbox.workspace import Workspace
from harness.tools.bounds import human_size

RESULTS_DIR = "/workspace/.warroom/tool-results"
PREVIEW_BYTES = 2000
OPEN = "<persisted-output>"
CLOSE = "</persisted-output>"
NOT_SAVED = "[The portion cut above was not kept: it could not be saved.]"


def results_path(tool_use_id: str) -> str:
    """Where the full result of ``tool_use_id`` is kept.

    >>> results_path("toolu_01AB")
    '/workspace/.warroom/tool-results/toolu_01AB.txt'
    """
    return f"{RESULTS_DIR}/{re.sub(r'[^A-Za-z0-9_-]', '_', tool_use_id)}.txt"


def preview(text: str, max_bytes: int = PREVIEW_BYTES) -> tuple[str, bool]:
    """The head of ``text`` within ``max_bytes`` (ending at a line break when there is
    one in the second half), and whether anything was left out.

    >>> preview("ab\\ncd\\nef", 6)
    ('ab\\ncd', True)
    """
    if len(text) <= max_bytes and len(text.encode()) <= max_bytes:
        return text, False
    # each character is one byte or more: the first max_bytes characters hold the head
    head = text[:max_bytes].encode()[:max_bytes].decode("utf-8", errors="ignore")
    cut = head.rfind("\n")
    return (head[:cut] if cut >= len(head) // 2 else head), True


OMITTED = re.compile(r"\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n")
"""The marker the sandbox server puts where it dropped the middle of a command's output
(``sandbox_client/server/capture.py``: it keeps the head and the tail)."""


def produced_size(text: str, size_bytes: int | None = None, *, command: bool = True) -> str:
    r"""The size of what the command produced, not only of what was kept: the sandbox keeps
    the head and tail of a large output and says how many bytes it dropped between.
    ``size_bytes``: ``text``'s UTF-8 length when the caller has it. ``command``: ``text``
    is a command's output (only that can hold the sandbox's marker; another tool's text
    is measured as it is).

    >>> produced_size("x" * 2048)
    '2KB'
    >>> produced_size("head\n[... 52428800 bytes omitted ...]\ntail")
    '50MB; the sandbox kept its first and last 8 bytes'
    """
    if not command or "bytes omitted ...]" not in text:  # not cut by the sandbox
        return human_size(len(text.encode()) if size_bytes is None else size_bytes)
    omitted = sum(int(n) for n in OMITTED.findall(text))
    kept = len(OMITTED.sub("", text).encode())
    if not omitted:
        return human_size(kept)
    return f"{human_size(kept + omitted)}; the sandbox kept its first and last {human_size(kept)}"


def persisted_text(
    path: str, text: str, size_bytes: int | None = None, *, command: bool = True
) -> str:
    """The result the model gets instead of ``text`` (kept whole at ``path``);
    ``size_bytes`` and ``command`` as ``produced_size`` takes them."""
    head, more = preview(text)
    size = produced_size(text, size_bytes, command=command)
    return (
        f"{OPEN}\nOutput too large ({size}). Full output saved to: "
        f"{path}\n\nPreview (first {human_size(PREVIEW_BYTES)}):\n{head}"
        + ("\n..." if more else "")
        + f"\n{CLOSE}"
    )


def cut_middle(text: str, max_chars: int) -> str:
    """Keep the head and tail of ``text`` when it is over ``max_chars``, with a marker.

    >>> cut_middle("a" * 6 + "b" * 6, 8)
    'aaaa\\n\\n... [4 characters cut] ...\\n\\nbbbb'
    """
    if len(text) <= max_chars:
        return text
    head = max_chars // 2
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n\n... [{cut} characters cut] ...\n\n{text[-tail:]}"


async def keep_in_file(
    text: str, tool_use_id: str, ws: Workspace, max_chars: int, *, command: bool = False
) -> str:
    """``text`` itself when it fits ``max_chars``; else a preview of the file that keeps it.
    ``command``: ``text`` is a command's output, whose size counts what the sandbox cut.

    Raises nothing for a sandbox that cannot take the file: the text is cut in the
    middle instead, with ``NOT_SAVED``.
    """
    if len(text) <= max_chars:
        return text
    path = results_path(tool_use_id)
    data = text.encode()
    try:
        await ws.write_file(path, data)
    except WorkspaceError:
        return cut_middle(text, max_chars) + "\n" + NOT_SAVED
    return persisted_text(path, text, len(data), command=command)
