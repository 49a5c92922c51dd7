"""The scrubber: a credential's secret removed from a reply in every form an upstream plausibly
echoes it in, across chunk boundaries.

A secret is found as itself and as its lower- or upper-case hex, and as the base64 of any text
it sits in: standard and URL-safe alphabets, at each of the three alignments (a secret inside
a larger encoded value is encoded differently depending on its offset modulo 3; what the
secret's own bits fully decide is matched). Each character of each of those forms may also
appear escaped, as servers escape what they echo: percent-encoded (either case of hex, also
``%25``-encoded once more), JSON-escaped (``\\uXXXX``, ``\\/``, ``\\"``, ``\\\\``), ``\\xXX``,
an HTML character reference (``&#47;``, ``&#x2F;``, ``&sol;``), or ``+`` for a space. Escaped
and plain characters may be mixed in one occurrence.

Not covered (so not promised): other encodings (base32, base85, URL-safe base64 without its
alignment's bits, quoted-printable, punycode), a secret split by line wrapping or other
characters (MIME base64 at 76 columns), transformed (hashed, reversed, case-changed apart from
hex), encrypted, or inside a compressed container other than the body's own gzip
(``replies.ReplyBody``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

REDACTED = b"[secret removed by the warroom gateway]"
MIN_FORM_BYTES = 4
"""Forms shorter than this are not scrubbed: they would match ordinary text."""


@dataclass(frozen=True)
class SecretForms:
    """Every form of some secrets, as one compiled pattern; ``longest`` is the most bytes one
    match can span (what a stream must hold back to find a secret split between chunks).

    ``literals`` (the unescaped forms, longest first, in upper and lower case for hex) and
    ``escapes`` (the bytes every escape starts with) are the fast path: data holding none of
    ``escapes`` can only hold the literal forms, found by ``bytes.replace`` at memory speed
    (the pattern costs ~20 ms a megabyte on CPython, ``bench/gateway.py``'s machine).
    """

    pattern: re.Pattern[bytes] | None
    longest: int
    literals: tuple[bytes, ...] = ()
    escapes: tuple[bytes, ...] = ()

    def sub(self, data: bytes) -> bytes:
        """``data`` with every form replaced by ``REDACTED``."""
        if self.pattern is None:
            return data
        if any(escape in data for escape in self.escapes):
            return self.pattern.sub(REDACTED, data)
        for literal in self.literals:
            data = data.replace(literal, REDACTED)
        return data

    @classmethod
    def of(cls, secrets: Iterable[bytes]) -> SecretForms:
        """The forms of each secret (see the module docstring); nothing for no secrets.

        >>> forms = SecretForms.of([b"tok/en+1"])
        >>> bool(forms.pattern.search(b'{"t": "tok\\\\/en%2b1"}'))
        True
        >>> bool(forms.pattern.search(base64.b64encode(b"xx:tok/en+1")))
        True
        """
        values = [secret for secret in secrets if secret]
        texts: set[bytes] = set()
        for secret in values:
            texts.update(_texts(secret))
        texts = {t for t in texts if len(t) >= MIN_FORM_BYTES}
        if not texts:
            return cls(None, 0)
        ordered = sorted(texts, key=len, reverse=True)  # the longest form wins at one place
        hexes = {secret.hex().encode() for secret in values}
        parts = [p for t in ordered for p in _escaped(t, hex_case=t in hexes)]
        longest = max(len(t) for t in ordered) * _LONGEST_ESCAPE
        literals = {t for t in ordered} | {t.upper() for t in ordered if t in hexes}
        escapes = [b"%", b"\\", b"&"] + ([b"+"] if any(b" " in t for t in ordered) else [])
        return cls(
            re.compile(b"|".join(parts)),
            longest,
            tuple(sorted(literals, key=len, reverse=True)),
            tuple(escapes),
        )


class Scrubber:
    """Replaces secrets in a byte stream, across chunk boundaries.

    It holds back the last ``longest - 1`` bytes of each chunk until the next one (or
    ``flush``), so a secret split between two chunks is still found.

    >>> s = Scrubber([b"hunter22"])
    >>> s.feed(b"pass=hun") + s.feed(b"ter22; hex 68756e7465723232") + s.flush()
    b'pass=[secret removed by the warroom gateway]; hex [secret removed by the warroom gateway]'
    """

    def __init__(self, secrets: SecretForms | Sequence[bytes]) -> None:
        forms = secrets if isinstance(secrets, SecretForms) else SecretForms.of(secrets)
        self._forms = forms
        self._keep = max(forms.longest - 1, 0)
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """Scrubbed bytes that are safe to send now."""
        if self._forms.pattern is None:
            return chunk
        data = self._forms.sub(self._held + chunk)
        if len(data) <= self._keep:
            self._held = data
            return b""
        cut = len(data) - self._keep
        self._held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        """The bytes held back, scrubbed."""
        data, self._held = self.whole(self._held), b""
        return data

    def text(self, value: str) -> str:
        """A whole string (a header value) scrubbed."""
        return self.whole(value.encode("latin-1", "replace")).decode("latin-1")

    def whole(self, value: bytes) -> bytes:
        """A whole value (a header's) scrubbed."""
        return self._forms.sub(value)


def _texts(secret: bytes) -> set[bytes]:
    """The unescaped forms: the secret, its hex, its base64 at each alignment."""
    found = {secret, secret.hex().encode()}
    for offset in range(3):
        for alphabet in (base64.b64encode, base64.urlsafe_b64encode):
            found.add(_aligned(secret, offset, alphabet))
    return found


def _aligned(secret: bytes, offset: int, encode: object) -> bytes:
    """The base64 characters that only ``secret``'s bits decide, when it starts ``offset``
    bytes into a 3-byte group.

    >>> _aligned(b"hunter22", 0, base64.b64encode), base64.b64encode(b"hunter22")
    (b'aHVudGVyMj', b'aHVudGVyMjI=')
    """
    assert callable(encode)
    encoded: bytes = encode(b"\0" * offset + secret + b"\0\0")
    first = -(-8 * offset // 6)  # the first character whose 6 bits all lie in the secret
    last = (8 * (offset + len(secret))) // 6  # one past the last such character
    return encoded[first:last]


_LONGEST_ESCAPE = 8  # "&#x002F;", "&equals;": the longest form one character takes below
_NAMED = {  # HTML's named character references for what secrets hold (WHATWG HTML §13.5)
    b"/": b"&sol;",
    b"+": b"&plus;",
    b"=": b"&equals;",
    b"&": b"&amp;",
    b'"': b"&quot;",
    b"'": b"&apos;",
    b"<": b"&lt;",
    b">": b"&gt;",
}


def _escaped(text: bytes, *, hex_case: bool) -> list[bytes]:
    """Patterns matching ``text`` with any of its characters escaped (module docstring), one
    per way its first character is written: each starts with a literal byte, so the regex
    engine skips ahead to the bytes that can start a match (a charset prefix)."""
    rest = b"".join(b"(?:" + b"|".join(_ways(c, hex_case=hex_case)) + b")" for c in text[1:])
    return [way + rest for way in _ways(text[0], hex_case=hex_case)]


def _ways(code: int, *, hex_case: bool) -> list[bytes]:
    """The ways one character may be written, each starting with one literal byte."""
    char = bytes([code])
    ways = [re.escape(char)]
    if hex_case and chr(code).isalpha():
        ways = [re.escape(char.lower()), re.escape(char.upper())]
    h = f"{code:02x}".encode()
    ways.append(b"%(?:25)?" + _any_case(h))
    if code < 0x80:
        ways += [b"\\\\u00" + _any_case(h), b"&#0{0,2}" + str(code).encode() + b";"]
        ways.append(b"&#[xX]0{0,2}" + _any_case(h) + b";")
        ways.append(b"\\\\[xX]" + _any_case(h))
        if char in b'/"\\':
            ways.append(re.escape(b"\\" + char))
        if char in _NAMED:
            ways.append(re.escape(_NAMED[char]))
        if char == b" ":
            ways.append(b"\\+")
    return ways


def _any_case(hex_digits: bytes) -> bytes:
    return b"".join(
        b"[" + bytes([d]).lower() + bytes([d]).upper() + b"]" if chr(d).isalpha() else bytes([d])
        for d in hex_digits
    )
