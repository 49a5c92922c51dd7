"""Refusing HTTP requests that Slack did not sign, logging what identifies them, not their body.

Slack signs each request (docs.slack.dev, "Verifying requests from Slack"):
``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}">`` with the app's
signing secret, and ``X-Slack-Request-Timestamp`` within five minutes of now. slack-bolt's
own check logs the whole body of every refused request at INFO (up to the HTTP server's
1 MiB each): anyone who can reach the port could fill the log, and a body is no help in
telling who sent it. This middleware replaces it (``request_verification_enabled=False``):
it checks the same signature with slack-sdk's ``SignatureVerifier`` and logs one bounded
line per refusal: method and path (when the HTTP listener put them in the context), body
length, a few headers, and the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier

logger = logging.getLogger(__name__)

HTTP_REQUEST_KEY = "warroom_http_request"
"""The bolt context key where the HTTP listener puts ``"<METHOD> <path> from <peer>"``."""
MAX_SKEW_S = 300  # Slack: refuse timestamps more than five minutes from now
LOGGED_HEADERS = ("x-slack-request-timestamp", "content-type", "user-agent", "x-forwarded-for")
MAX_HEADER_CHARS = 80


def refusal(
    verifier: SignatureVerifier, body: bytes, headers: Mapping[str, Sequence[str]], now_s: float
) -> str | None:
    """Why a request with ``body`` and (lower-case) ``headers`` is refused; None if it is
    signed. Reasons: ``unsigned``, ``bad timestamp``, ``stale timestamp``, ``bad signature``."""
    timestamp = _first(headers, "x-slack-request-timestamp")
    signature = _first(headers, "x-slack-signature")
    if not timestamp or not signature:
        return "unsigned"
    if not timestamp.isdigit():
        return "bad timestamp"
    if abs(now_s - int(timestamp)) > MAX_SKEW_S:
        return "stale timestamp"
    if not verifier.is_valid(body, timestamp, signature):
        return "bad signature"
    return None


def describe(request: str, body: bytes, headers: Mapping[str, Sequence[str]]) -> str:
    """One line identifying a refused request, without its body: at most a few hundred
    characters whatever the request (header values cut and quoted)."""
    shown = " ".join(
        f"{name}={_first(headers, name)[:MAX_HEADER_CHARS]!r}"
        for name in LOGGED_HEADERS
        if _first(headers, name)
    )
    return f"{request}, {len(body)} bytes body" + (f", {shown}" if shown else "")


class SignedRequests(AsyncMiddleware):
    """Lets through only requests Slack signed with ``signing_secret`` (Socket Mode's are
    not HTTP requests and pass); a refused one gets bolt's 401 ``invalid request``."""

    def __init__(self, signing_secret: str, clock: Callable[[], float] = time.time) -> None:
        self._verifier = SignatureVerifier(signing_secret)
        self._clock = clock

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],  # bolt passes it by this name
    ) -> BoltResponse:
        """Refuse ``req`` unless signed; else hand it to the next middleware."""
        if req.mode == "socket_mode":
            return await next()
        body = req.raw_body.encode()
        reason = refusal(self._verifier, body, req.headers, self._clock())
        if reason is None:
            return await next()
        request = str(req.context.get(HTTP_REQUEST_KEY) or "a request")
        logger.warning("refused %s: %s", describe(request, body, req.headers), reason)
        return BoltResponse(status=401, body={"error": "invalid request"})


def _first(headers: Mapping[str, Sequence[str]], name: str) -> str:
    values = headers.get(name)
    return values[0] if values else ""
