"""The HTTP requests a ``curl``, ``wget`` or httpie call would make: method and URL (pure).

Read the way each tool documents it: curl's ``-X``/``--request``, ``-I`` (HEAD), data options
(POST, unless ``-G``) and ``-T`` (PUT), URLs as operands or ``--url``; wget's ``--method``,
``--post-data``/``--post-file``; httpie's (``http``, ``https``, ``xh``) optional METHOD word
before the URL, else POST when a data item (``a=b``, ``a:=1``, ``a@file``) is given. A URL
without a scheme gets the tool's default (``http://``; ``https://`` for ``https``/``xhs``).
A method the guard cannot know is reported as ``?`` (not a read).

The method reported is the *effective* one, what an upstream that honours the usual
overrides acts on: a read with an ``X-HTTP-Method-Override``, ``X-HTTP-Method`` or
``X-Method-Override`` header, or a ``_method`` parameter in its query (Rails, Laravel,
Symfony, Express's method-override), is the method they name; a header the policy cannot
read (``curl -H @file``, a config file ``-K``, ``wget -e``) makes it ``?``. curl's
``--next`` starts a new set of options: each set is read on its own.

>>> from harness.guard.calls import ProgramCall
>>> http_calls(ProgramCall("curl", ("-sX", "POST", "https://pd.example/incidents"), ""))
(HttpCall(method='POST', url='https://pd.example/incidents'),)
>>> http_calls(ProgramCall("http", ("pd.example/x", "status=resolved"), ""))
(HttpCall(method='POST', url='http://pd.example/x'),)
>>> http_calls(ProgramCall("curl", ("-H", "X-HTTP-Method-Override: DELETE", "pd.example"), ""))
(HttpCall(method='DELETE', url='http://pd.example'),)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from harness.guard.calls import UNKNOWN, ProgramCall
from harness.guard.options import Arg, has_option, names, option_values, parse_args, spec

_CURL = spec(
    "-X --request -d --data --data-raw --data-binary --data-urlencode --data-ascii --json",
    "-F --form --form-string -T --upload-file -H --header -o --output -u --user -A",
    "--user-agent -e --referer -b --cookie -c --cookie-jar -x --proxy -m --max-time",
    "--connect-timeout -w --write-out --retry -K --config --url -r --range --cacert --cert",
    "--key -E --resolve --limit-rate -U --proxy-user --retry-delay --retry-max-time",
    "--url-query --variable",
)
_CURL_DATA = tuple(
    names(
        "-d --data --data-raw --data-binary --data-urlencode --data-ascii --json -F --form",
        "--form-string",
    )
)
_WGET = spec(
    "-O --output-document -o --output-file -a --append-output -e --execute --header",
    "--method --body-data --body-file --post-data --post-file -U --user-agent -t --tries",
    "-T --timeout -P --directory-prefix --user --password --http-user --http-password",
    "-i --input-file",
)
_HTTPIE = spec(
    "-a --auth -A --auth-type -o --output --session --session-read-only --verify --cert",
    "--cert-key --timeout --proxy -p --print -s --style --pretty --format-options",
    "--max-redirects --default-scheme",
)
_HTTPIE_PROGRAMS = {"http": "http://", "https": "https://", "xh": "http://", "xhs": "https://"}
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_READS = frozenset({"GET", "HEAD"})
OVERRIDE_HEADERS = frozenset({"x-http-method-override", "x-http-method", "x-method-override"})
"""Headers that tell an upstream to act as another method (the effective method)."""
OVERRIDE_PARAMETER = "_method"
_NEXT = frozenset({"--next", "-:"})
_CURL_EXPANDS = ("--variable", "--expand-")
"""curl 8.3's variables: ``--expand-request '{{m}}'`` is any method (curl(1) --variable)."""


@dataclass(frozen=True)
class HttpCall:
    """One request: ``method`` upper-cased (``?`` when unknown) and the absolute ``url``."""

    method: str
    url: str


def http_calls(call: ProgramCall) -> tuple[HttpCall, ...]:
    """The requests ``call`` makes; () for a program that is not an HTTP client. A word only
    known when it runs that may be an option (``xargs curl``) makes every method ``?``."""
    if call.name == "curl":
        found = _curl(call)
    elif call.name == "wget":
        found = _wget(call)
    elif call.name in _HTTPIE_PROGRAMS:
        found = _httpie(call)
    else:
        return ()
    if any(arg.startswith(UNKNOWN) for arg in call.args):
        found = tuple(HttpCall("?", r.url) for r in found) or (HttpCall("?", "…"),)
    return found


def _curl(call: ProgramCall) -> tuple[HttpCall, ...]:
    found: list[HttpCall] = []
    segment: list[str] = []
    for arg in (*call.args, "--next"):
        if arg in _NEXT:
            found += _curl_segment(segment)
            segment = []
        else:
            segment.append(arg)
    return tuple(found)


def _curl_segment(args: Sequence[str]) -> list[HttpCall]:
    parsed = parse_args(args, _CURL)
    urls = _operands(parsed) + option_values(parsed, "--url")
    explicit = option_values(parsed, "-X", "--request")
    get = has_option(parsed, "-G", "--get")
    data = option_values(parsed, *_CURL_DATA)
    if explicit:
        method = explicit[-1]
    elif has_option(parsed, "-I", "--head"):
        method = "HEAD"
    elif has_option(parsed, "-T", "--upload-file"):
        method = "PUT"
    elif has_option(parsed, *_CURL_DATA) and not get:
        method = "POST"
    else:
        method = "GET"
    overrides = _header_overrides(option_values(parsed, "-H", "--header"))
    if has_option(parsed, "-K", "--config") or any(a.startswith(_CURL_EXPANDS) for a in args):
        overrides.append(UNKNOWN)  # a config file or a variable may set any method or header
    for query in option_values(parsed, "--url-query"):
        overrides += _parameter_overrides(query.lstrip("+"))
    if get:  # the data becomes the query
        overrides += _parameter_overrides("&".join(data))
        overrides += [UNKNOWN for value in data if value.startswith("@")]
    return [HttpCall(_effective(method, overrides, url), _absolute(url, "http://")) for url in urls]


def _wget(call: ProgramCall) -> tuple[HttpCall, ...]:
    parsed = parse_args(call.args, _WGET)
    explicit = option_values(parsed, "--method")
    if explicit:
        method = explicit[-1]
    elif has_option(parsed, "--post-data", "--post-file"):
        method = "POST"
    else:
        method = "GET"
    overrides = _header_overrides(option_values(parsed, "--header"))
    for command in option_values(parsed, "-e", "--execute"):  # wgetrc commands
        if any(word in command.lower() for word in ("method", "post", "body", "header")):
            overrides.append(UNKNOWN)
    return tuple(
        HttpCall(_effective(method, overrides, u), _absolute(u, "http://"))
        for u in _operands(parsed)
    )


def _httpie(call: ProgramCall) -> tuple[HttpCall, ...]:
    parsed = parse_args(call.args, _HTTPIE)
    words = _operands(parsed)
    method: str | None = None
    if words and (words[0].upper() in _METHODS or UNKNOWN in words[0]) and len(words) > 1:
        method, words = words[0], words[1:]
    if not words:
        return ()
    url, items = words[0], words[1:]
    if method is None:
        data = any(_is_data_item(item) for item in items)
        method = "POST" if data or has_option(parsed, "-f", "--form") else "GET"
    overrides = _header_overrides(
        [item for item in items if ":" in item and not _is_data_item(item)]
    )
    for item in items:  # a query item: name==value
        name, equals, value = item.partition("==")
        if equals and name.strip().lower() == OVERRIDE_PARAMETER:
            overrides.append(value or UNKNOWN)
    return (
        HttpCall(_effective(method, overrides, url), _absolute(url, _HTTPIE_PROGRAMS[call.name])),
    )


def _header_overrides(headers: Sequence[str]) -> list[str]:
    """The methods named by override headers among ``headers`` (``Name: value`` texts);
    ``UNKNOWN`` for headers read from a file or with an unknown name."""
    found = []
    for header in headers:
        if header.startswith("@") or UNKNOWN in header.partition(":")[0]:
            found.append(UNKNOWN)
            continue
        name, _, value = header.partition(":")
        if name.strip().lower().replace("_", "-") in OVERRIDE_HEADERS:  # as the gateway reads it
            found.append(value.strip() or UNKNOWN)
    return found


def _parameter_overrides(query: str) -> list[str]:
    """The methods named by ``_method`` parameters in ``query`` (``a=1&_method=DELETE``)."""
    pairs = parse_qsl(query.replace(";", "&"), keep_blank_values=True)  # as the gateway splits
    return [value or UNKNOWN for name, value in pairs if name.lower() == OVERRIDE_PARAMETER]


def _effective(method: str, overrides: list[str], url: str) -> str:
    """What an upstream honouring overrides acts as: a changing method stays; a read with
    an override (header or ``_method`` in ``url``'s query) becomes the method it names."""
    if "?" in url:
        overrides = [*overrides, *_parameter_overrides(urlsplit(url).query)]
    named = _method(method)
    if named not in _READS or not overrides:
        return named
    changing = [_method(o) for o in overrides if _method(o) not in _READS]
    return changing[-1] if changing else named


def _is_data_item(item: str) -> bool:
    """An httpie request item that sends data (``a=b``, ``a:=1``, ``a@f``), not a query
    (``a==b``) or a header (``a:b``)."""
    if ":=" in item or "@" in item:
        return True
    return "=" in item and "==" not in item


def _operands(parsed: list[Arg]) -> list[str]:
    return [a.value for a in parsed if a.option is None and a.value is not None]


def _method(text: str) -> str:
    return "?" if UNKNOWN in text or not text else text.upper()


def _absolute(url: str, scheme: str) -> str:
    url = url.replace(UNKNOWN, "…")
    if "://" in url:
        return url
    if url.startswith(":"):  # httpie's shorthand for localhost
        return f"{scheme}localhost{url}"
    return scheme + url
