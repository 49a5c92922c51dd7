"""A worker freezes what start-up made out of the garbage collector's generations.

Once its runtime is open (``RuntimeHolder.get``), the process's long-lived objects are
in the collector's permanent generation, so a step's garbage (a long session read on a
process that did not run its previous step) does not make a full collection walk them.
"""

from __future__ import annotations

import gc
import io
from pathlib import Path

from pydantic import SecretStr

from bot.cli.terminal import TerminalReporter
from bot.durable.actors import RuntimeHolder
from bot.settings import Settings


async def test_opening_a_workers_runtime_freezes_what_start_up_made(tmp_path: Path) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        anthropic_api_key=SecretStr("fake-key"),
        database_url=None,
        data_dir=tmp_path,
    )

    async def enqueue(session_id: str, token: str) -> None:
        return None

    holder = RuntimeHolder(settings, enqueue, reporter=TerminalReporter(io.StringIO()))
    gc.unfreeze()  # whatever an earlier test froze goes back to the generations
    try:
        assert gc.get_freeze_count() == 0
        runtime = await holder.get()
        assert gc.get_freeze_count() > 0
        # And the runtime's own objects are among the frozen ones: a collection of the
        # oldest generation no longer sees them
        assert not any(o is runtime for o in gc.get_objects(generation=2))
    finally:
        await holder.close()
        gc.unfreeze()
