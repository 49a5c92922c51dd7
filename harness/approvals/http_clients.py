"""The HTTP requests a ``curl``, ``wget`` or httpie call would make: method and URL (pure).

Read the way each tool documents it: curl's ``-X``/``--request``, ``-I`` (HEAD), data options
(POST, unless ``-G``) and ``-T`` (PUT), URLs as operands or ``--url``; wget's ``--method``,
``--post-data``/``--post-file``; httpie's (``http``, ``https``, ``xh``) optional METHOD word
before the URL, else POST when a data item (``a=b``, ``a:=1``, ``a@file``) is given. A URL
without a scheme gets the tool's default (``http://``; ``https://`` for ``https``/``xhs``).
A method the guard cannot know is reported as ``?`` (not a read).

>>> from harness.guard.calls import ProgramCall
>>> http_calls(ProgramCall("curl", ("-sX", "POST", "https://pd.example/incidents"), ""))
(HttpCall(method='POST', url='https://pd.example/incidents'),)
>>> http_calls(ProgramCall("http", ("pd.example/x", "status=resolved"), ""))
(HttpCall(method='POST', url='http://pd.example/x'),)
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.guard.calls import UNKNOWN, ProgramCall
from harness.guard.options import Arg, has_option, names, option_values, parse_args, spec

_CURL = spec(
    "-X --request -d --data --data-raw --data-binary --data-urlencode --data-ascii --json",
    "-F --form --form-string -T --upload-file -H --header -o --output -u --user -A",
    "--user-agent -e --referer -b --cookie -c --cookie-jar -x --proxy -m --max-time",
    "--connect-timeout -w --write-out --retry -K --config --url -r --range --cacert --cert",
    "--key -E --resolve --limit-rate -U --proxy-user --retry-delay --retry-max-time",
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


@dataclass(frozen=True)
class HttpCall:
    """One request: ``method`` upper-cased (``?`` when unknown) and the absolute ``url``."""

    method: str
    url: str


def http_calls(call: ProgramCall) -> tuple[HttpCall, ...]:
    """The requests ``call`` makes; () for a program that is not an HTTP client."""
    if call.name == "curl":
        return _curl(call)
    if call.name == "wget":
        return _wget(call)
    if call.name in _HTTPIE_PROGRAMS:
        return _httpie(call)
    return ()


def _curl(call: ProgramCall) -> tuple[HttpCall, ...]:
    parsed = parse_args(call.args, _CURL)
    urls = _operands(parsed) + option_values(parsed, "--url")
    explicit = option_values(parsed, "-X", "--request")
    if explicit:
        method = explicit[-1]
    elif has_option(parsed, "-I", "--head"):
        method = "HEAD"
    elif has_option(parsed, "-T", "--upload-file"):
        method = "PUT"
    elif has_option(parsed, *_CURL_DATA) and not has_option(parsed, "-G", "--get"):
        method = "POST"
    else:
        method = "GET"
    return tuple(HttpCall(_method(method), _absolute(url, "http://")) for url in urls)


def _wget(call: ProgramCall) -> tuple[HttpCall, ...]:
    parsed = parse_args(call.args, _WGET)
    explicit = option_values(parsed, "--method")
    if explicit:
        method = explicit[-1]
    elif has_option(parsed, "--post-data", "--post-file"):
        method = "POST"
    else:
        method = "GET"
    return tuple(HttpCall(_method(method), _absolute(u, "http://")) for u in _operands(parsed))


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
    return (HttpCall(_method(method), _absolute(url, _HTTPIE_PROGRAMS[call.name])),)


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
