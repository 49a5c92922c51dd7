"""A reply body made readable for the scrubber, streamed: its content-encoding undone, a gzip
body inflated, scrubbed and compressed again.

The gateway asks upstreams for ``identity``, but a server may compress anyway: a
``Content-Encoding`` of gzip or deflate (zlib or raw, as servers disagree) is undone and the
body goes to the sandbox plain. A body that *is* gzip data whatever its headers say (a ``.gz``
download, an API answering ``application/gzip``) is inflated, scrubbed, and compressed again,
so the sandbox still gets a gzip file, without the secret. Other encodings (``br``, ``zstd``,
several stacked) are refused before the reply starts (``UnreadableBody``); a gzip body that
breaks off corrupt ends the reply there, since what follows cannot be scrubbed.

Not looked into: other containers (zip, a gzip inside the inflated gzip, bzip2, xz).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

from sandbox_client.gateway.scrubber import Scrubber

INFLATE_STEP_BYTES = 256 * 1024
"""The most one decompression call produces: the event loop is never held for long, and a
small compressed read that inflates to gigabytes (a "zip bomb") is streamed, not held."""
GZIP_MAGIC = b"\x1f\x8b\x08"  # RFC 1952 §2.3.1: ID1, ID2, CM=deflate


class UnreadableBody(ValueError):
    """A reply body the gateway cannot read, so cannot scrub."""


class ReplyBody:
    """One reply's body, fed as it arrives; yields the bytes to send the sandbox.

    Raises:
        UnreadableBody: (from the constructor) a content-encoding it cannot undo; (from
            ``feed``) compressed data that is corrupt.
    """

    def __init__(self, headers: Sequence[tuple[bytes, bytes]], scrubber: Scrubber) -> None:
        self._decoded = _Inflater(_content_coding(headers))
        self._scrubber = scrubber
        self._start = b""
        self._gzip: tuple[_Inflater, zlib._Compress] | None = None
        self._sniffed = False

    def feed(self, raw: bytes, last: bool) -> Iterator[bytes]:
        """The bytes to send for ``raw`` (``last``: the body's final read), in pieces."""
        for piece in self._decoded.inflate(raw, last):
            yield from self._body(piece, final=False)
        if last:
            yield from self._body(b"", final=True)

    def _body(self, data: bytes, *, final: bool) -> Iterator[bytes]:
        if not self._sniffed:
            self._start += data
            if len(self._start) < len(GZIP_MAGIC) and not final:
                return
            data, self._start, self._sniffed = self._start, b"", True
            if data.startswith(GZIP_MAGIC):
                self._gzip = (_Inflater("gzip"), zlib.compressobj(wbits=16 + zlib.MAX_WBITS))
        if self._gzip is None:
            yield self._scrubber.feed(data)
            if final:
                yield self._scrubber.flush()
            return
        inflater, deflater = self._gzip
        for piece in inflater.inflate(data, final):
            yield deflater.compress(self._scrubber.feed(piece))
        if final:
            yield deflater.compress(self._scrubber.flush()) + deflater.flush()


class _Inflater:
    """Undoes one coding (``gzip``, ``deflate`` or None for nothing), in bounded pieces;
    a gzip stream of several members (RFC 1952 §2.2) is read to its end."""

    def __init__(self, coding: str | None) -> None:
        self._coding = coding
        self._decoder: zlib._Decompress | None = None
        self._start = b""

    def inflate(self, raw: bytes, last: bool) -> Iterator[bytes]:
        if self._coding is None:
            yield raw
            return
        if self._decoder is None:  # deflate: zlib-wrapped or raw, known from its first bytes
            self._start += raw
            if len(self._start) < 2 and not last:
                return
            raw, self._start = self._start, b""
            if not raw:  # no body at all (a HEAD, a 204, a 304)
                return
            self._decoder = zlib.decompressobj(_wbits(self._coding, raw))
        try:
            yield from self._pieces(raw, last)
        except zlib.error as exc:
            raise UnreadableBody(f"the upstream's {self._coding} data is corrupt ({exc})") from exc

    def _pieces(self, raw: bytes, last: bool) -> Iterator[bytes]:
        assert self._decoder is not None
        data = raw
        while data:
            if self._decoder.eof:  # the next gzip member (RFC 1952 §2.2), or trailing bytes
                if self._coding != "gzip" or not data.startswith(GZIP_MAGIC[:2]):
                    raise zlib.error("bytes after the end of the compressed data")
                self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
            yield self._decoder.decompress(data, INFLATE_STEP_BYTES)
            data = self._decoder.unconsumed_tail or self._decoder.unused_data
        if last:
            yield self._decoder.flush()
            if not self._decoder.eof:
                raise zlib.error("the compressed data ends early")


def _wbits(coding: str, start: bytes) -> int:
    """zlib's window setting for ``coding`` given its first bytes: gzip; deflate as servers
    send it, zlib-wrapped (RFC 9110 §8.4.1.2) or raw (RFC 1951) when the first two bytes are
    not a zlib header (RFC 1950 §2.2: CM=8, header checksum a multiple of 31)."""
    if coding == "gzip":
        return 32 + zlib.MAX_WBITS  # a gzip header, or a zlib one as some servers send
    if len(start) >= 2 and start[0] & 0x0F == 8 and (start[0] << 8 | start[1]) % 31 == 0:
        return zlib.MAX_WBITS
    return -zlib.MAX_WBITS


def _content_coding(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The one coding to undo (``gzip``/``deflate``; None: nothing).

    Raises:
        UnreadableBody: another coding, or several.
    """
    codings = [
        c.strip().lower() for k, v in headers if k == b"content-encoding" for c in v.split(b",")
    ]
    codings = [c for c in codings if c and c != b"identity"]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in (b"gzip", b"x-gzip"):
        return "gzip"
    if len(codings) == 1 and codings[0] == b"deflate":
        return "deflate"
    shown = b", ".join(codings).decode("latin-1")
    raise UnreadableBody(f"cannot read the upstream's content-encoding {shown}, so cannot scrub it")
