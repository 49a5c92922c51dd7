"""The end-of-run check finds the run's own jails, and only those."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_client import LocalConfig, LocalProvider
from tests import leaks


@pytest.mark.bwrap
async def test_the_leak_check_finds_a_jail_below_the_run_and_none_elsewhere(
    tmp_path: Path,
) -> None:
    # Given a jail whose state directory is below this run's temporary directory
    started = leaks.run_started_ticks()
    provider = LocalProvider(LocalConfig(state_dir=tmp_path / "sbx"))
    handle = await provider.provision("leak-check")
    try:
        # Then the check finds its bwrap processes (started by their full path) there
        found = leaks._jails_since(started, (tmp_path,), frozenset())
        assert handle.pid in found
        # And none of them below another run's directory
        assert leaks._jails_since(started, (tmp_path.parent / "other",), frozenset()) == {}
    finally:
        await provider.destroy(handle)
