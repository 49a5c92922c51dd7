"""A step that fails gives its lease back, so the retry need not wait for the lease to run out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.durable.wiring import Runtime
from bot.settings import Settings
from harness import Checkpoint, ModelReply, ModelUnavailable, Requester
from memory_store import Claim, SessionKey
from tests.bot.durable_support import poll

LEASE_S = 60.0  # far longer than the test: only a released lease lets the retry claim


class DownModel:
    """A model API that is down: every call fails as the adapter reports it."""

    async def complete(self, **_: object) -> ModelReply:
        raise ModelUnavailable(status=529, attempts=4)


class NoSlack:
    """A thread poster for a test that never posts."""

    async def post_answer(self, **_: object) -> str:
        raise AssertionError("nothing is answered in this test")

    async def show_progress(self, **_: object) -> None:
        return None


async def _no_enqueue(session_id: str, token: str) -> None:
    raise AssertionError("a failed step enqueues nothing")


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        database_url=None,
        data_dir=tmp_path,
        anthropic_api_key=SecretStr("sk-ant-test"),
        lease_s=LEASE_S,
    )
    opened = await Runtime.open(
        settings, enqueue=_no_enqueue, reporter=NoSlack(), model=DownModel()
    )
    yield opened
    await opened.close()


async def test_a_failed_step_gives_its_lease_back(runtime: Runtime) -> None:
    # Given a runnable session
    cp = Checkpoint("s-release", "T1", "C1", Requester("U1")).to_json()
    opened = await runtime.sessions.open_or_join(
        SessionKey("T1", "C1", "1.1"),
        requester_id="U1",
        initial_checkpoint=cp,
        text="look",
        source_ts="1.1",
        session_id="s-release",
    )
    assert opened.token is not None
    # When its step fails because the model API is down
    with pytest.raises(ModelUnavailable):
        await runtime.driver.run("s-release", opened.token)

    # Then another worker can take the same step at once (the lease is cut to a
    # millisecond, not the 60 s it had), as its next attempt
    async def claimed() -> Claim | None:
        assert opened.token is not None
        return await runtime.sessions.claim(
            "s-release", opened.token, worker_id="another", lease_s=LEASE_S
        )

    claim = await poll(claimed, timeout_s=5, what="the released step to be claimable")
    assert claim.crash_count == 1
