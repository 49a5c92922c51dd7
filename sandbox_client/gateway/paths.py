"""Request paths as the gateway judges them: one normal form, matched and forwarded, or a refusal.

A rule's path prefix is only a boundary if the upstream reads the path the way the gateway
did. So the gateway decides on one normal form and forwards exactly that form (RFC 3986
§6.2.2): percent-escapes of unreserved characters decoded (§2.3), the hex of every other escape
in upper case (§6.2.2.1), ``.`` and ``..`` segments removed (§5.2.4). What servers still read in
different ways after that is refused, with the reason (``AmbiguousPath.reason``): an encoded
``/`` or ``\\``, a raw ``\\``, ``;`` path parameters (raw or encoded: Java servers drop them
before matching, so ``/public/..;/x`` climbs), an escaped ``%`` before two hex digits (double
encoding, which a server that decodes twice turns into ``.`` or ``/``), control characters,
escapes that are not valid UTF-8 (overlong ``%c0%ae`` is a ``.`` to some decoders), characters
that Unicode normalisation (NFKC) turns into ``.``, ``/``, ``\\``, ``;`` or ``%`` (fullwidth
``．．／``), a malformed escape, and a fragment.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote_to_bytes, urlsplit

UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
"""RFC 3986 §2.3: the characters whose escapes are equivalent to them."""

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_REFUSED_RAW = {"\\": "a \\ (backslash)", ";": "a ; (path parameters)", "#": "a # (fragment)"}
_REFUSED_ESCAPES = {
    "%2F": "an encoded / (%2F)",
    "%5C": "an encoded \\ (%5C)",
    "%3B": "an encoded ; (%3B)",
    "%00": "an encoded NUL (%00)",
}
_DOUBLE = re.compile(r"%25[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"%(?:[01][0-9A-F]|7F)")


class AmbiguousPath(ValueError):
    """A request path the gateway will not forward: ``reason`` says what in it is ambiguous."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"the path {path[:200]!r} is ambiguous: {reason}")
        self.path = path
        self.reason = reason


def split_target(path_query: str) -> tuple[str, str]:
    """A request's path (in its normal form, ``normalise``) and its query (as sent, without
    ``?``; empty when there is none).

    >>> split_target("/api/./v1/query?query=up&x=%2e%2e")
    ('/api/v1/query', 'query=up&x=%2e%2e')

    Raises:
        AmbiguousPath: the path is ambiguous, or the target holds a fragment (``#``), which a
            client never sends and servers cut in different places.
    """
    path, _, query = path_query.partition("?")
    if "#" in query:
        raise AmbiguousPath(path_query, _REFUSED_RAW["#"])
    return normalise(path), query


PATH_OVERRIDE_HEADERS = frozenset(
    {"x-original-url", "x-rewrite-url", "x-original-uri", "x-override-url"}
)
"""Headers some servers act on instead of the request line's path (IIS's URL Rewrite,
Symfony and Zend behind it read ``X-Original-URL`` and ``X-Rewrite-URL``)."""


def refuse_path_override(path: str, headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Refuse a request that names a second path in a header a server may act on instead.

    Raises:
        AmbiguousPath: a header in ``PATH_OVERRIDE_HEADERS`` (any case, ``_`` for ``-``).

    >>> try:
    ...     refuse_path_override("/a", [(b"X_Original_URL", b"/admin")])
    ... except AmbiguousPath as exc:
    ...     print(exc.reason)
    a second path in X-Original-Url
    """
    for name, _ in headers:
        text = name.decode("latin-1").lower().replace("_", "-")
        if text in PATH_OVERRIDE_HEADERS:
            raise AmbiguousPath(path, f"a second path in {text.title()}")


def normalise(path: str) -> str:
    """``path`` (the part of a request target before ``?``) in its one normal form.

    >>> normalise("/public/../x")
    '/x'
    >>> normalise("/public/%2e%2E/x")
    '/x'
    >>> normalise("/%7euser/a%3fb/./c/")
    '/~user/a%3Fb/c/'
    >>> try:
    ...     normalise("/public/..%2fx")
    ... except AmbiguousPath as exc:
    ...     print(exc.reason)
    an encoded / (%2F)

    Raises:
        AmbiguousPath: the path does not start with ``/``, or holds something servers read
            in different ways (see the module docstring).
    """
    if not path.startswith("/"):
        raise AmbiguousPath(path, "a request path starts with /")
    for char, what in _REFUSED_RAW.items():
        if char in path:
            raise AmbiguousPath(path, what)
    if _STRAY_PERCENT.search(path):
        raise AmbiguousPath(path, "a % that does not start an escape of two hex digits")
    decoded = _ESCAPE.sub(_decode_unreserved, path)
    for escape, what in _REFUSED_ESCAPES.items():
        if escape in decoded:
            raise AmbiguousPath(path, what)
    if _DOUBLE.search(decoded):
        raise AmbiguousPath(path, "an encoded % before two hex digits (double encoding)")
    if _CONTROL.search(decoded):
        raise AmbiguousPath(path, "an encoded control character")
    try:
        text = unquote_to_bytes(decoded).decode("utf-8")
    except UnicodeDecodeError:
        raise AmbiguousPath(path, "escapes that are not valid UTF-8") from None
    if not text.isascii() and _folds_to_syntax(text):
        raise AmbiguousPath(path, "characters Unicode normalisation turns into . / \\ ; or %")
    return remove_dot_segments(decoded)


def _folds_to_syntax(text: str) -> bool:
    """Whether NFKC (which some servers apply to paths) makes path syntax out of other
    characters: a fullwidth ``．．／`` is ``../`` to them."""
    folded = unicodedata.normalize("NFKC", text)
    return any(folded.count(c) != text.count(c) for c in "./\\;%")


def origin_form(target: str, scheme: str, host: str, port: int) -> str:
    """The path and query of a request target read inside a connection to ``host:port``:
    an origin-form target as it is, an absolute-form one (RFC 9112 §3.2.2) only when it names
    that same origin (else it is returned whole, and ``normalise`` refuses it).

    >>> origin_form("https://api.example:8443/v1?x=1", "https", "api.example", 8443)
    '/v1?x=1'
    >>> origin_form("https://elsewhere.example/v1", "https", "api.example", 443)
    'https://elsewhere.example/v1'
    """
    if target.startswith("/"):
        return target
    try:
        parts = urlsplit(target)
        same = (parts.scheme, parts.hostname, parts.port or 443) == (scheme, host, port)
    except ValueError:  # a port that is not a number, an unclosed IPv6 bracket
        return target
    if not same or parts.username is not None or parts.password is not None:
        return target
    return after_authority(target, parts.scheme, parts.netloc)


def after_authority(target: str, scheme: str, netloc: str) -> str:
    """What follows ``scheme://netloc`` in an absolute target, as sent (a fragment too, so
    ``split_target`` sees it), starting with ``/``.

    >>> after_authority("http://h:8080?q#f", "http", "h:8080")
    '/?q#f'
    """
    rest = target[len(scheme) + 3 + len(netloc) :]
    return rest if rest.startswith("/") else "/" + rest


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path: ``.`` and ``..`` segments resolved, never
    above the root.

    >>> remove_dot_segments("/a/b/../../../c/./d/..")
    '/c/'
    """
    segments = path.split("/")[1:]
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment in (".", ".."):
            if segment == ".." and out:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(segment)
    return "/" + "/".join(out)


def _decode_unreserved(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in UNRESERVED else "%" + match.group(1).upper()
