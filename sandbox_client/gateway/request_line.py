"""The first bytes of a connection to the gateway, judged before a whole request arrives.

h11 parses a request only once its head is complete (the blank line after the headers), so
bytes that can never become one (a TLS hello sent to the plain HTTP port, a line typed into
``nc``) would wait for the idle timeout and be closed without a word. ``not_http`` says, as
soon as the first bytes show it, why they cannot start an HTTP/1.1 request line
(RFC 9112 §3: ``method SP request-target SP HTTP-version``, the method a token).
"""

from __future__ import annotations

import re

__all__ = ["not_http"]

TLS_HANDSHAKE = 0x16
"""The first byte of a TLS record carrying a handshake (RFC 8446 §5.1: ContentType 22)."""
_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]"
_LINE = re.compile(_TOKEN + rb"+ [\x21-\x7e]+ HTTP/[0-9]\.[0-9]\r?")
_START = re.compile(_TOKEN + rb"*( [\x21-\x7e]*( [HTP/0-9.]*\r?)?)?")


def not_http(head: bytes) -> str | None:
    """Why ``head`` (the first bytes received) cannot start an HTTP/1.1 request, or None
    while it still may.

    >>> not_http(b"GET http://prom.internal/ HT") is None
    True
    >>> not_http(b"\\x16\\x03\\x01\\x02\\x00\\x01")
    'a TLS handshake sent to the plain HTTP port (the proxy URL is http://, not https://)'
    >>> not_http(b"HELLO THERE\\r\\n")
    "the request line 'HELLO THERE' is not 'METHOD target HTTP/1.1'"
    """
    if head[:1] == bytes([TLS_HANDSHAKE]):
        return (
            "a TLS handshake sent to the plain HTTP port (the proxy URL is http://, not https://)"
        )
    line, newline, _ = head.partition(b"\n")
    if newline and _LINE.fullmatch(line):
        return None
    if not newline and _START.fullmatch(line):
        return None
    shown = line[:60].rstrip(b"\r").decode("ascii", "backslashreplace")
    return f"the request line {shown!r} is not 'METHOD target HTTP/1.1'"
