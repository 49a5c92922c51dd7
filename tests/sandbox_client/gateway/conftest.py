"""The recording upstream of ``echo.py`` as a fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.sandbox_client.gateway.echo import Echo, echo_upstream


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    async with echo_upstream() as running:
        yield running
