"""A real Prometheus for tests (``bot.drill.prometheus``, which the drill uses too): TLS and
basic auth, scraping an exporter the test controls.

Without Debian's ``prometheus`` package (``.ci/run`` installs it) the tests that need it skip
loudly, or fail when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from bot.drill.prometheus import HOST, USER, Exporter, Prometheus, missing
from bot.drill.prometheus import real_prometheus as _started
from tests.conftest import missing as skip_or_fail

__all__ = ["HOST", "PASSWORD", "USER", "Exporter", "Prometheus", "real_prometheus"]

PASSWORD = "prom-basic-7c41d0e2b9"


@contextlib.asynccontextmanager
async def real_prometheus(
    *, rules: str = "", alertmanager: str | None = None
) -> AsyncIterator[Prometheus]:
    """A running Prometheus whose ``USER`` has ``PASSWORD``; stopped afterwards.
    ``rules`` and ``alertmanager``: as ``bot.drill.prometheus.real_prometheus``'s."""
    if (reason := missing()) is not None:
        skip_or_fail(f"{reason}: .ci/run installs it")
    async with _started(password=PASSWORD, rules=rules, alertmanager=alertmanager) as running:
        yield running
