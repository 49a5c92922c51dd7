"""The method a request really asks for: its verb, or the override a server would obey.

Web frameworks let a request name another method than its verb, for clients that can only send
GET and POST: the ``X-HTTP-Method-Override``, ``X-HTTP-Method`` and ``X-Method-Override``
headers (Google's and Microsoft's APIs, Symfony, Express's ``method-override``) and a
``_method`` parameter in the query string or a form body (Rails' ``Rack::MethodOverride``,
Laravel, Symfony). A read-only rule is only read-only if the gateway judges the method the
upstream will act on, so it judges the override: ``GET`` with ``X-HTTP-Method-Override: DELETE``
is a ``DELETE``. Header names are compared as CGI servers do (case and ``_``/``-`` alike),
parameters are split at ``&`` and ``;``. Overrides that disagree with each other are refused
(``AmbiguousMethod``), as is a form body in a content-encoding (``HiddenOverride``: a server
may inflate it and find a ``_method``).

Not seen: an override inside a JSON body or under another name a server was configured with.

Judging runs on the gateway's event loop, shared by every session, so its cost is bounded
by the request's size, whatever its shape: a body is scanned (in C) for the parameter's
name in any spelling, only the pairs or parts holding it are decoded, and a request shaped
to be costly (more than ``MAX_CONTENT_TYPES`` content types, ``MAX_CANDIDATES`` spellings of
the name, ``MAX_PARTS`` parts) is refused (``Unjudgeable``): parsing a whole form body or
multipart body took seconds and ~50 times its size in memory.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote_plus

from sandbox_client.gateway.rules import READ_ONLY_METHODS

OVERRIDE_HEADERS = ("x-http-method-override", "x-http-method", "x-method-override")
OVERRIDE_PARAMETER = "_method"
_MAYBE_PARAMETER = re.compile(  # ``_method`` with any of its letters percent-encoded
    rb"(?i)(?:_|%5f)(?:m|%6d)(?:e|%65)(?:t|%74)(?:h|%68)(?:o|%6f)(?:d|%64)"
)
MAX_CONTENT_TYPES = 4
MAX_CANDIDATES = 16
MAX_PARTS = 256
MAX_PART_HEAD_BYTES = 16 * 1024
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"

HeaderPairs = Iterable[tuple[str | bytes, str | bytes]]


class AmbiguousMethod(ValueError):
    """Overrides in one request name different methods (``methods``, sorted)."""

    def __init__(self, methods: Iterable[str]) -> None:
        self.methods = tuple(sorted(methods))
        super().__init__(f"the request asks for several methods at once: {', '.join(self.methods)}")


class HiddenOverride(AmbiguousMethod):
    """A form body in a content-encoding: a server that inflates it may find a ``_method``
    the gateway cannot read, so the request is refused."""

    def __init__(self, encoding: str) -> None:
        ValueError.__init__(
            self,
            f"a form body in the content-encoding {encoding!r} may hold a _method the gateway "
            "does not read",
        )
        self.methods = ()


class Unjudgeable(AmbiguousMethod):
    """A request shaped to be costly to judge (see the module docstring): refused."""

    def __init__(self, why: str) -> None:
        ValueError.__init__(self, f"{why}: the gateway does not judge requests of that shape")
        self.methods = ()


@dataclass(frozen=True)
class Override:
    """A method asked for by an override, and where (``X-HTTP-Method-Override``, ``_method``)."""

    method: str
    source: str


def effective_method(
    method: str, headers: HeaderPairs = (), query: str = "", body: bytes = b""
) -> str:
    """The method a server that obeys overrides acts on: the override's, else ``method``.

    Args:
        method: the request's verb.
        headers: (name, value) pairs, ``str`` or ``bytes`` (latin-1).
        query: the query string, without ``?``.
        body: the request body (a form body's ``_method`` counts).

    Raises:
        AmbiguousMethod: overrides naming different methods.

    >>> effective_method("GET", [("X-HTTP-Method-Override", "delete")])
    'DELETE'
    >>> effective_method("POST", [], "", b"a=1&%5Fmethod=PUT")
    'PUT'
    >>> effective_method("POST", [(b"content-type", b"application/json")], "x=1", b"{}")
    'POST'
    """
    found = method_override(headers, query, body)
    return found.method if found is not None else method.upper()


def judged_method(verb: str, effective: str) -> str:
    """The method a request is judged by for approval: the one of its verb and its override
    that changes something (``effective`` when both do or neither does).

    >>> judged_method("GET", "DELETE"), judged_method("POST", "GET"), judged_method("GET", "GET")
    ('DELETE', 'POST', 'GET')
    """
    verb = verb.upper()
    if effective in READ_ONLY_METHODS and verb not in READ_ONLY_METHODS:
        return verb
    return effective


def method_override(
    headers: HeaderPairs = (), query: str = "", body: bytes = b""
) -> Override | None:
    """The override a request carries, if any (see ``effective_method``).

    Raises:
        AmbiguousMethod: overrides naming different methods (``HiddenOverride``: a form
            body in a content-encoding; ``Unjudgeable``: a request shaped to be costly).
    """
    found: dict[str, str] = {}
    content_types: list[str] = []
    encoding = ""
    for raw_name, raw_value in headers:
        name, value = _text(raw_name).lower().replace("_", "-"), _text(raw_value)
        if name in OVERRIDE_HEADERS:
            for part in value.split(","):
                if part.strip():
                    found.setdefault(part.strip().upper(), _text(raw_name))
        elif name == "content-type":  # every one: servers keep the first, the last, or split
            content_types += [part.strip() for part in value.split(",")]
        elif name == "content-encoding" and value.strip().lower() not in ("", "identity"):
            encoding = value.strip()
    content_types = list(dict.fromkeys(content_types or [""]))  # each parsed once
    if len(content_types) > MAX_CONTENT_TYPES:
        raise Unjudgeable(f"{len(content_types)} content types")
    kinds = {t.split(";", 1)[0].strip().lower() for t in content_types}
    if body and encoding and kinds & {_FORM, _MULTIPART, ""}:
        raise HiddenOverride(encoding)
    if query:
        for value in _form_overrides(query.encode("latin-1", "replace")):
            found.setdefault(value, f"{OVERRIDE_PARAMETER} in the query")
    if body and _MAYBE_PARAMETER.search(body):
        if kinds & {_FORM, ""}:  # a form body sent without its type is read as one by some
            for value in _form_overrides(body):
                found.setdefault(value, f"{OVERRIDE_PARAMETER} in the form body")
        for content_type in content_types:
            if content_type.split(";", 1)[0].strip().lower() == _MULTIPART:
                for value in _multipart_overrides(content_type, body):
                    found.setdefault(value, f"{OVERRIDE_PARAMETER} in the form body")
    if len(found) > 1:
        raise AmbiguousMethod(found)
    return next((Override(m, source) for m, source in found.items()), None)


def _parameters(pairs: Iterable[tuple[str, str]]) -> Iterable[str]:
    for name, value in pairs:
        if name.strip().lower() == OVERRIDE_PARAMETER and value.strip():
            yield value.strip().upper()


def _form_overrides(form: bytes) -> Iterator[str]:
    """The ``_method`` values of a query or form body (pairs split at ``&`` and ``;``, as
    older parsers do), decoding only the pairs where the name appears in some spelling.

    Raises:
        Unjudgeable: more than ``MAX_CANDIDATES`` spellings of the name.

    >>> list(_form_overrides(b"a=1&_%6Dethod=put;b=2"))
    ['PUT']
    """
    for count, match in enumerate(_MAYBE_PARAMETER.finditer(form), start=1):
        if count > MAX_CANDIDATES:
            raise Unjudgeable(f"more than {MAX_CANDIDATES} {OVERRIDE_PARAMETER} parameters")
        at = match.start()
        start = max(form.rfind(b"&", 0, at), form.rfind(b";", 0, at)) + 1
        ends = [i for i in (form.find(b"&", at), form.find(b";", at)) if i >= 0]
        name, _, value = form[start : min(ends, default=len(form))].partition(b"=")
        pair = (unquote_plus(name.decode("latin-1")), unquote_plus(value.decode("latin-1")))
        yield from _parameters([pair])


def _multipart_overrides(content_type: str, body: bytes) -> Iterator[str]:
    """The ``_method`` values of a ``multipart/form-data`` body: its parts found by their
    boundary (in C), and only the heads naming the parameter in some spelling parsed.

    Raises:
        Unjudgeable: more than ``MAX_PARTS`` parts, or a part's head over
            ``MAX_PART_HEAD_BYTES``.
    """
    declared = email.message.Message()
    declared["content-type"] = content_type
    boundary = declared.get_boundary()
    if not boundary:
        return
    delimiter = b"--" + boundary.encode("latin-1", "replace")
    if body.count(delimiter) > MAX_PARTS + 1:
        raise Unjudgeable(f"a multipart body of more than {MAX_PARTS} parts")
    for part in body.split(delimiter)[1:]:
        ends = [(i, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (i := part.find(sep)) >= 0]
        if not ends:
            continue
        head_end, sep_len = min(ends)
        head = part[:head_end]
        if len(head) > MAX_PART_HEAD_BYTES:
            raise Unjudgeable(f"a multipart part's head over {MAX_PART_HEAD_BYTES} bytes")
        if not _MAYBE_PARAMETER.search(head):
            continue
        headers = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            head.lstrip(b"\r\n") + b"\r\n\r\n"
        )
        name = headers.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part[head_end + sep_len :]  # its line break goes with the strip
            yield from _parameters([(name, payload.decode("latin-1"))])


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
