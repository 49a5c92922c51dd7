"""A worker keeps fresh jails ready (``WARROOM_SANDBOX_WARM_POOL``), hands one to a new
session, counts them in its metrics, and leaves none behind when it stops."""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import SecretStr

from bot.durable.wiring import Runtime
from bot.metrics import CountingProvider, default_metrics
from bot.settings import Settings
from harness import ModelReply
from sandbox_client import LocalProvider, SandboxHandle
from sandbox_client.providers.local import procfs
from tests.conftest import require_bwrap


class NoModel:
    async def complete(self, **_: object) -> ModelReply:
        raise AssertionError("no model call in this test")


class NoSlack:
    async def post_answer(self, **_: object) -> str:
        raise AssertionError("nothing is answered in this test")

    async def show_progress(self, **_: object) -> None:
        return None


async def _no_enqueue(session_id: str, token: str) -> None:
    return None


def _pooled(provider: LocalProvider) -> list[SandboxHandle]:
    """The handles of the jails waiting in ``provider``'s pool (from its state directory)."""
    found = (provider.find(p.name) for p in provider.config.state_dir.glob("pool-*"))
    return [h for h in found if h is not None]


def _events(event: str) -> float:
    value = default_metrics().registry.get_sample_value(
        "warroom_sandbox_events_total", {"event": event}
    )
    return value or 0.0


async def test_a_worker_hands_a_pooled_jail_to_a_new_session_and_destroys_the_pool_at_stop() -> (
    None
):
    require_bwrap()
    data_dir = Path(tempfile.mkdtemp(prefix="wr-pool-"))  # short: socket paths ≤ 107 bytes
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        database_url=None,
        data_dir=data_dir,
        anthropic_api_key=SecretStr("sk-ant-test"),
        sandbox_warm_pool=1,
    )
    pooled_before, hits_before = _events("pooled"), _events("pool_hit")
    runtime = await Runtime.open(settings, enqueue=_no_enqueue, reporter=NoSlack(), model=NoModel())
    try:
        counting = runtime.manager.provider
        assert isinstance(counting, CountingProvider)
        provider = counting.inner
        assert isinstance(provider, LocalProvider)
        # Given the worker's pool has filled
        await provider.pool.filled()
        waiting = _pooled(provider)
        assert len(waiting) == 1
        # When a session's sandbox is made
        made = await runtime.manager.ensure(None, session_id="s-pool")
        # Then it is the waiting jail, recorded in the ledger under the session's sandbox id
        assert made.handle.pid == waiting[0].pid
        assert made.handle.sandbox_id.startswith("sbx-")
        assert (await made.client.exec("t", "echo ok", timeout_s=10)).stdout == "ok\n"
        assert await runtime.manager.ledger.known([made.handle.sandbox_id])
        await provider.pool.filled()  # and another waits in its place
        refilled = _pooled(provider)
        assert len(refilled) == 1
        assert refilled[0].pid != made.handle.pid
        assert _events("pool_hit") == hits_before + 1
        assert _events("pooled") == pooled_before + 2
    finally:
        await runtime.close()
    # And once the worker stopped, no jail is left: not the session's, not the pool's
    jails = [made.handle, *refilled]
    assert not [h for h in jails if procfs.is_alive(h.pid or 0, h.pid_start_ticks)]
    assert list((data_dir / "sbx").glob("pool-*")) == []
