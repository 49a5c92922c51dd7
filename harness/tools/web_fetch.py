"""WebFetch: fetch a URL through the egress gateway, as markdown, and answer a prompt on it.

Claude Code's interface (``sdk-tools.d.ts`` of 2.1.332: ``url``, ``prompt``, ``offset``):
an ``http://`` URL is upgraded to ``https://``, an HTML page becomes markdown, and a small
model reads the page and answers ``prompt``; its answer is the result. A redirect to the
same host is followed; one to another host is not: the result says where it goes, so the
model can fetch that URL itself (Claude Code does the same).

The request is made by ``curl`` inside the session's sandbox, with the call's own proxy
credential (``Workspace.exec``), so it goes through the egress gateway exactly as a Bash
command's requests do: the rules decide what it may reach, a refusal comes back as the
gateway's own sentence, and the gateway's scrubber has removed any credential a rule added
before the page reaches the harness (docs/tools.md, WebFetch).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from http import HTTPStatus
from shlex import quote
from urllib.parse import urljoin, urlsplit, urlunsplit

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter
from pydantic import BaseModel, ConfigDict, Field

from harness.errors import ModelRejected
from harness.model.messages import Message, TextBlock
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, schema_error, tool_error

MAX_URL_CHARS = 2_000
MAX_FETCH_BYTES = 1_000_000
"""The most of a response body read: what a sandbox command's output carries whole (its
``max_output_bytes``, 1 MiB, less room for the status lines); the rest is cut with a note."""
MAX_CONTENT_CHARS = 100_000
"""The most markdown the small model reads in one call (Claude Code's cut for WebFetch);
the rest is reached with ``offset``."""
MAX_REDIRECTS = 10
FETCH_TIMEOUT_S = 60
ANSWER_MAX_TOKENS = 4_096
GATEWAY_REFUSAL = "Blocked by the warroom egress gateway"
"""How the gateway's 403 for a request no rule allows begins (``gateway.proxy``)."""
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_STATUS = re.compile(r"^warroom-fetch: (\d{3}) ?(.*)$", re.MULTILINE)
_LOCATION = re.compile(r"^warroom-location: ?(.*)$", re.MULTILINE)


class WebFetchInput(BaseModel):
    """WebFetch's parameters: ``offset`` is where in the page's markdown (characters) the
    part the small model reads starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    offset: int | None = Field(default=None, ge=0)


@dataclass(frozen=True)
class Fetched:
    """One HTTP response as ``curl`` saw it: ``status``, ``content_type`` (may be ""),
    ``location`` (a redirect's target, may be ""), the body (at most ``MAX_FETCH_BYTES``;
    ``cut``: there was more)."""

    status: int
    content_type: str
    location: str
    body: str
    cut: bool = False


def upgraded(url: str) -> str | None:
    """``url`` with ``http`` upgraded to ``https`` (Claude Code's rule), or None when it is
    not an http(s) URL with a host.

    >>> upgraded("http://example.com/a?b=1"), upgraded("ftp://x/"), upgraded("nope")
    ('https://example.com/a?b=1', None, None)
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > MAX_URL_CHARS:
        return None
    return urlunsplit(parts._replace(scheme="https"))


def same_host(a: str, b: str) -> bool:
    """Whether a redirect from ``a`` to ``b`` stays on the same site (``www.`` aside, port
    included), the redirects Claude Code follows.

    >>> same_host("https://x.io/a", "https://www.x.io/b"), same_host("https://x.io", "https://y.io")
    (True, False)
    """
    pa, pb = urlsplit(a), urlsplit(b)

    def site(netloc: str) -> str:
        return netloc.lower().removeprefix("www.")

    return pa.scheme == pb.scheme and site(pa.netloc) == site(pb.netloc)


def curl_command(url: str) -> str:
    """The sandbox command fetching ``url`` (http or https only, no redirect followed): the
    body on stdout, cut after ``MAX_FETCH_BYTES`` (one byte more says there was more); the
    status, content type and redirect target on stderr, where the page cannot forge them.
    The call's proxy variables route it through the gateway."""
    write_out = r"%{stderr}\nwarroom-fetch: %{http_code} %{content_type}\n"
    write_out += r"warroom-location: %{redirect_url}\n"
    return (
        f"curl -sS --globoff --proto =http,https --max-time {FETCH_TIMEOUT_S} "
        f"-H 'Accept: text/markdown, text/html, */*' -w {quote(write_out)} -- {quote(url)} "
        f"| head -c {MAX_FETCH_BYTES + 1}"
    )


def parse_fetched(stdout: str, stderr: str) -> Fetched | None:
    """``curl_command``'s output as a ``Fetched``, or None when curl got no response.

    >>> parse_fetched("<p>hi</p>", "warroom-fetch: 200 text/html\\nwarroom-location: \\n")
    Fetched(status=200, content_type='text/html', location='', body='<p>hi</p>', cut=False)
    """
    status, location = _STATUS.search(stderr), _LOCATION.search(stderr)
    if status is None or status.group(1) == "000":
        return None
    where = location.group(1).strip() if location is not None else ""
    body = stdout.encode("utf-8", "surrogateescape")
    cut = len(body) > MAX_FETCH_BYTES
    text = body[:MAX_FETCH_BYTES].decode("utf-8", "replace") if cut else stdout
    return Fetched(int(status.group(1)), status.group(2).strip(), where, text, cut)


_NOT_CONTENT = ("head", "script", "style", "noscript", "template", "svg")
_CONVERTER = MarkdownConverter(heading_style="ATX")


def as_markdown(fetched: Fetched) -> str:
    """The page as markdown when it is HTML (``markdownify``, without what a browser does
    not show: head, scripts, styles), else its text as it came. CPU-bound.

    >>> as_markdown(Fetched(200, "text/html", "", "<style>p{}</style><h2>A</h2><p>b <i>c</i>"))
    '## A\\n\\nb *c*'
    """
    if "html" not in fetched.content_type.lower():
        return fetched.body
    soup = BeautifulSoup(fetched.body, "html.parser")
    for tag in soup(_NOT_CONTENT):
        tag.decompose()
    return str(_CONVERTER.convert_soup(soup)).strip()


def prompt_for(content: str, prompt: str) -> str:
    """What the small model is asked: the page, then the caller's prompt."""
    return (
        f"Web page content:\n---\n{content}\n---\n\n{prompt}\n\n"
        "Answer from the content above only, concisely. Quote exact words only when they "
        "matter, and briefly."
    )


async def web_fetch(p: WebFetchInput, ctx: ToolContext) -> ToolOutcome:
    """Fetch, convert, cut and answer; every failure the model can act on is a tool error,
    and so is a request the small model's API refuses for good (``ModelRejected``).

    Raises:
        WorkspaceUnavailable: the sandbox could not run the fetch (the step is retried).
        ModelUnavailable, ModelStalled: the small model did not answer (retried likewise).
        DatabaseUnavailable: its call could not be written to the ledger.
    """
    if ctx.small_model is None:
        return tool_error("WebFetch is not available in this session (no model to read pages).")
    parts = urlsplit(p.url)
    if not (parts.scheme and parts.netloc):  # not a URL at all: the schema's own error
        issue = {"code": "invalid_format", "format": "url", "path": ["url"]}
        return schema_error(issue | {"message": "Invalid URL"})
    url = upgraded(p.url)
    if url is None:
        return tool_error("Invalid URL")
    fetched, url = await _follow(url, ctx)
    if isinstance(fetched, ToolOutcome):
        return fetched
    if fetched.status in _REDIRECT_STATUSES:
        target = urljoin(url, fetched.location)
        return ToolOutcome(_redirect_notice(url, target, fetched.status, p.prompt))
    if fetched.status >= 400:
        if fetched.status == 403 and fetched.body.startswith(GATEWAY_REFUSAL):
            return tool_error(fetched.body.strip())
        return ToolOutcome(status_notice(fetched.status))
    content = await asyncio.to_thread(as_markdown, fetched)  # CPU-bound on a large page
    if fetched.cut:
        content += f"\n\n[Page cut: only its first {MAX_FETCH_BYTES} bytes were read.]"
    start = p.offset or 0
    part = content[start : start + MAX_CONTENT_CHARS]
    end = start + len(part)
    try:
        reply = await ctx.small_model.complete(
            system="You read a web page for an agent and answer its question about it.",
            tools=(),
            messages=(Message("user", (TextBlock(prompt_for(part, p.prompt)),)),),
            max_tokens=ANSWER_MAX_TOKENS,
        )
    except ModelRejected as exc:  # permanent (e.g. an unknown WARROOM_SMALL_MODEL): say it
        return tool_error(f"The model reading the page refused the request: {exc}")
    answer = "".join(b.text for b in reply.content if isinstance(b, TextBlock)).strip()
    answer = answer or "No response from model"
    if end < len(content):
        answer += "\n\n" + unread_note(len(content), start, end)
    return ToolOutcome(answer)


def status_notice(status: int) -> str:
    """The result for an error status (Claude Code 2.1.336's words, captured; not an
    error: the body is not read).

    >>> print(status_notice(404))  # doctest: +ELLIPSIS
    The server returned HTTP 404 Not Found.
    <BLANKLINE>
    The response body was not retrieved. If this URL requires authentication, use an ...
    """
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    return (
        f"The server returned HTTP {status}{phrase}.\n\nThe response body was not retrieved. "
        "If this URL requires authentication, use an authenticated tool (e.g. `gh` for "
        "GitHub, or an MCP-provided fetch tool) instead of WebFetch."
    )


def unread_note(total: int, start: int, end: int) -> str:
    """What follows an answer that covered part of the page (Claude Code 2.1.336's note).

    >>> unread_note(600058, 0, 100000)  # doctest: +ELLIPSIS
    "[WebFetch note: this page's text is 600058 characters long and the answer above ...]"
    """
    return (
        f"[WebFetch note: this page's text is {total} characters long and the answer above "
        f"covers only characters {start} to {end}; the final {total - end} were not read "
        f"\u2014 to read on, call WebFetch again with the same url and offset: {end}.]"
    )


async def _follow(url: str, ctx: ToolContext) -> tuple[Fetched | ToolOutcome, str]:
    """Fetch ``url``, following redirects within its host; the last response and its URL."""
    for hop in range(MAX_REDIRECTS + 1):
        name = ctx.tool_use_id if hop == 0 else f"{ctx.tool_use_id}.{hop}"
        result = await ctx.workspace.exec(name, curl_command(url), timeout_s=FETCH_TIMEOUT_S + 5)
        fetched = parse_fetched(result.stdout, result.stderr)
        if fetched is None:
            said = [line for line in result.stderr.splitlines() if line.startswith("curl:")]
            reason = "; ".join(said) or f"curl exit code {result.exit_code}"
            return tool_error(f"Failed to fetch {url}: {reason}"), url
        target = urljoin(url, fetched.location) if fetched.location else ""
        if fetched.status not in _REDIRECT_STATUSES or not target or not same_host(url, target):
            return fetched, url
        url = target
    return tool_error(f"Too many redirects (more than {MAX_REDIRECTS})"), url


def _redirect_notice(url: str, target: str, status: int, prompt: str) -> str:
    """The result for a redirect to another host, which Claude Code does not follow
    (its 2.1.336 text, captured)."""
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    return (
        "REDIRECT DETECTED: The URL redirects to a location that was not fetched "
        "automatically.\n\n"
        f"    Original URL: {url}\n"
        "    Redirect URL (from the server's Location header \u2014 server-supplied, not "
        f"verified): {target}\n"
        f"    Status: {status}{phrase}\n\n"
        "    To complete your request, I need to fetch content from the redirected URL. "
        "Please use WebFetch again with these parameters:\n"
        f'    - url: "{target}"\n    - prompt: "{prompt}"'
    )


WEB_FETCH = ModelTool(
    name="WebFetch",
    description=(
        "Fetch a URL and answer a prompt about its content. The page is fetched through "
        "Warroom's egress gateway (the org's rules decide which hosts may be reached; a "
        "refused URL returns the gateway's reason), HTML is converted to markdown, and a "
        "small, fast model reads it and answers your prompt: its answer is the result. "
        "http:// URLs are upgraded to https://. A redirect to another host is not followed: "
        "the result gives the new URL to fetch. Long pages are cut at 100000 characters of "
        "markdown; offset reads further. Read-only: GET requests only."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "description": "The URL to fetch."},
            "prompt": {
                "type": "string",
                "description": "What to extract from or answer about the page.",
            },
            "offset": {
                "type": "number",
                "minimum": 0,
                "description": "Where in the page's markdown to start reading (characters).",
            },
        },
        "required": ["url", "prompt"],
        "additionalProperties": False,
    },
    params=WebFetchInput,
    runner=web_fetch,
)
