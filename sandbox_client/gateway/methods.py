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
"""

from __future__ import annotations

import email.parser
import email.policy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from sandbox_client.gateway.rules import READ_ONLY_METHODS

OVERRIDE_HEADERS = ("x-http-method-override", "x-http-method", "x-method-override")
OVERRIDE_PARAMETER = "_method"
_MAYBE_PARAMETER = re.compile(rb"(?i)(?:_|%5f)method")
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
            body in a content-encoding).
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
    content_types = content_types or [""]
    kinds = {t.split(";", 1)[0].strip().lower() for t in content_types}
    if body and encoding and kinds & {_FORM, _MULTIPART, ""}:
        raise HiddenOverride(encoding)
    if query and _MAYBE_PARAMETER.search(query.encode("latin-1", "replace")):
        for value in _parameters(_pairs(query)):
            found.setdefault(value, f"{OVERRIDE_PARAMETER} in the query")
    if body and _MAYBE_PARAMETER.search(body):
        for content_type in content_types:
            for value in _body_parameters(content_type, body):
                found.setdefault(value, f"{OVERRIDE_PARAMETER} in the form body")
    if len(found) > 1:
        raise AmbiguousMethod(found)
    return next((Override(m, source) for m, source in found.items()), None)


def _parameters(pairs: Iterable[tuple[str, str]]) -> Iterable[str]:
    for name, value in pairs:
        if name.strip().lower() == OVERRIDE_PARAMETER and value.strip():
            yield value.strip().upper()


def _body_parameters(content_type: str, body: bytes) -> Iterable[str]:
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == _MULTIPART:
        head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        for part in message.iter_parts() if message.is_multipart() else ():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                yield from _parameters([(name, payload.decode("latin-1"))])
        return
    if kind in (_FORM, ""):  # a form body sent without its type is still read as one by some
        yield from _parameters(_pairs(body.decode("latin-1")))


def _pairs(form: str) -> list[tuple[str, str]]:
    """A query or form body's pairs, split at ``&`` and at ``;`` (as older parsers do)."""
    return parse_qsl(form.replace(";", "&"), keep_blank_values=True)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
