"""How big a tool result may be, and the sentences that say a result was too big.

Figures and sentences follow Claude Code 2.1.332 (its Read, Grep and Bash tools):
a whole-file Read over 256 KB is refused; a Read whose numbered text would exceed
about 25,000 tokens is refused; Grep drops lines over 500 columns; a result over
a tool's character cap is kept in a file and replaced by a preview
(``persisted``).
"""

from __future__ import annotations

MAX_READ_BYTES = 256 * 1024  # a whole-file Read above this is refused
MAX_READ_TOKENS = 25_000  # a Read whose text is larger is refused
CHARS_PER_TOKEN = 4  # a rough estimate, for text without a tokenizer at hand
MAX_GREP_COLUMNS = 500  # Grep replaces longer lines by a marker
MAX_RESULT_CHARS = 30_000  # any tool result above this is kept in a file
GREP_MAX_RESULT_CHARS = 20_000  # Grep's own, lower cap
LARGE_READ_MAX_CHARS = 100_000  # Read with allow_large: at most this much text


def human_size(size_bytes: int) -> str:
    """A size as Claude Code prints it.

    >>> human_size(900), human_size(262_144), human_size(4_016_071)
    ('900 bytes', '256KB', '3.8MB')
    """
    kib = size_bytes / 1024
    if kib < 1:
        return f"{size_bytes} bytes"
    for value, unit in ((kib, "KB"), (kib / 1024, "MB"), (kib / 1024 / 1024, "GB")):
        if value < 1024 or unit == "GB":
            return f"{value:.1f}".removesuffix(".0") + unit
    raise AssertionError("unreachable")


def file_too_large(size_bytes: int) -> str:
    """Read's refusal of a whole file over ``MAX_READ_BYTES`` (Claude Code 2.1.336's
    sentences, given unwrapped)."""
    return (
        f"File content ({human_size(size_bytes)}) exceeds maximum allowed size "
        f"({human_size(MAX_READ_BYTES)}). Use offset and limit parameters to read specific "
        "portions of the file, or search for specific content instead of reading the whole "
        "file. To read it anyway, up to what still fits in your context, call Read again "
        "with allow_large: true \u2014 only if you genuinely need all of it or the user asked "
        "for the whole file."
    )


def fit_large(text: str, max_chars: int = LARGE_READ_MAX_CHARS) -> str:
    """A Read with ``allow_large``: the numbered lines that fit in ``max_chars``, whole,
    then a line saying where the view stopped.

    >>> fit_large("1\\ta\\n2\\tb\\n3\\tc", 8)
    '1\\ta\\n2\\tb\\n\\n(Stopped after line 2 to fit in your context; read on with offset 3.)'
    """
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars + 1)
    kept = text[:cut] if cut > 0 else text[:max_chars]
    last = kept.rsplit("\n", 1)[-1].split("\t", 1)[0]
    following = int(last) + 1 if last.isdigit() else 0
    return (
        f"{kept}\n\n(Stopped after line {last} to fit in your context; read on with offset "
        f"{following}.)"
    )


def estimated_tokens(text: str) -> int:
    """A rough token count of ``text`` (characters / 4)."""
    return len(text) // CHARS_PER_TOKEN


def too_many_tokens(tokens: int) -> str:
    """Read's refusal of a window over ``MAX_READ_TOKENS`` (Claude Code's sentence)."""
    return (
        f"File content ({tokens} tokens) exceeds maximum allowed tokens ({MAX_READ_TOKENS}). "
        "Use offset and limit parameters to read specific portions of the file, or search "
        "for specific content instead of reading the whole file."
    )


def grep_line(text: str, *, is_context: bool) -> str:
    """A Grep line, or Claude Code's marker when it is over ``MAX_GREP_COLUMNS``.

    >>> grep_line("x" * 501, is_context=False), grep_line("ok", is_context=True)
    ('[Omitted long matching line]', 'ok')
    """
    if len(text) <= MAX_GREP_COLUMNS:
        return text
    return f"[Omitted long {'context' if is_context else 'matching'} line]"
