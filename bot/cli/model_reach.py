"""``warroom chat`` and ``serve`` say at start when the model API cannot be reached.

The model adapter retries a call that fails to connect (connection refused, a name that
does not resolve) with backoff for about a minute before the turn fails with "model
unavailable"; a person who mistyped ``ANTHROPIC_BASE_URL`` learnt of it only then. At
start a TCP connection is tried to the API's host and port (a few seconds at most, off the
prompt's way): when it fails, the chat prints one ``!`` line naming the host and why, and
``serve`` logs a warning; neither stops, since the API may come back. With a proxy in the
environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``) the SDK connects through it,
so no direct check is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from typing import TextIO
from urllib.parse import urlsplit

from bot.settings import Settings

__all__ = ["DEFAULT_API", "model_unreachable", "report_model_unreachable"]

DEFAULT_API = "https://api.anthropic.com"
CONNECT_TIMEOUT_S = 5.0
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")


async def model_unreachable(
    settings: Settings, *, timeout_s: float = CONNECT_TIMEOUT_S
) -> str | None:
    """Why the model API (``ANTHROPIC_BASE_URL``, else Anthropic's) cannot be reached, as
    one sentence naming its host; None when a connection opened, or a proxy is set."""
    if any(os.environ.get(v) or os.environ.get(v.lower()) for v in PROXY_VARIABLES):
        return None
    url = urlsplit(settings.anthropic_base_url or DEFAULT_API)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except socket.gaierror as exc:
        why = f"the name {host} does not resolve: {exc.strerror or exc}"
    except TimeoutError:
        why = f"no answer within {timeout_s:.0f} s"
    except OSError as exc:  # asyncio's text is "Connect call failed (…)": say the errno's
        why = os.strerror(exc.errno) if exc.errno else str(exc)
    else:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return None
    return (
        f"cannot reach the model API at {host}:{port} ({why}); each model call is retried "
        "for about a minute before the turn fails: check ANTHROPIC_BASE_URL and the network"
    )


async def report_model_unreachable(settings: Settings, out: TextIO) -> None:
    """Print one ``!`` line to ``out`` when the model API cannot be reached."""
    if (why := await model_unreachable(settings)) is not None:
        out.write(f"  ! {why}\n")
        out.flush()
