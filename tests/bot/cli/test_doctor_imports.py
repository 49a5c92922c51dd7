"""``warroom doctor --quick`` (the container health check) loads only what its checks need.

It runs every 30 s in every container, so what it imports is paid each time: the harness
alone costs seconds of CPU. Each test runs the command in a fresh interpreter and reads
that interpreter's ``sys.modules`` (behaviour, not timing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("harness", "anthropic", "mcp", "sandbox_client", "slack_sdk", "slack_bolt", "dramatiq")
"""Packages none of the quick checks (data directory, database, Redis) uses."""
ORM = ("sqlalchemy", "alembic", "aiosqlite")
"""What the store's full machinery loads: the quick database check reads the schema's
revision with the driver alone (``memory_store.probe_schema``)."""

RUN_AND_LIST = """
import json, sys
from bot.cli.app import main
sys.argv = ["warroom", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def _loaded_by(tmp_path: Path, *arguments: str) -> tuple[set[str], str]:
    """Top-level packages loaded by ``warroom <arguments>``, and its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARROOM_", "DATABASE_"))}
    env |= {"WARROOM_DATA_DIR": str(tmp_path / "data")}
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, *arguments],
        cwd=tmp_path,  # no .env of the checkout
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    *output, modules = done.stdout.strip().splitlines()
    return set(json.loads(modules)), "\n".join(output)


def test_quick_doctor_checks_the_database_without_importing_the_harness(
    tmp_path: Path,
) -> None:
    # Given a data directory and the default (SQLite) database
    # When the health check runs
    loaded, output = _loaded_by(tmp_path, "doctor", "--quick")
    # Then it checked the data directory and the database
    assert "data_dir" in output
    assert "database" in output
    # And loaded none of the packages only the full checks use, nor the store's ORM and
    # migration tool, nor Redis's client without a REDIS_URL
    assert loaded & set(HEAVY) == set(), output
    assert loaded & {*ORM, "redis"} == set(), output


def test_the_settings_default_model_and_tokens_are_the_harness_defaults() -> None:
    # bot.settings spells the two defaults itself so that reading settings stays cheap
    from bot.settings import DEFAULT_MAX_TOKENS, DEFAULT_MODEL, Settings
    from harness import DEFAULT_MAX_TOKENS as HARNESS_MAX_TOKENS
    from harness import DEFAULT_MODEL as HARNESS_MODEL

    assert (DEFAULT_MODEL, DEFAULT_MAX_TOKENS) == (HARNESS_MODEL, HARNESS_MAX_TOKENS)
    from bot.settings import DEFAULT_SMALL_MODEL
    from harness import DEFAULT_SMALL_MODEL as HARNESS_SMALL_MODEL

    assert DEFAULT_SMALL_MODEL == HARNESS_SMALL_MODEL
    assert Settings.model_fields["small_model"].default == HARNESS_SMALL_MODEL
    fields = Settings.model_fields
    assert (fields["model"].default, fields["max_tokens"].default) == (
        HARNESS_MODEL,
        HARNESS_MAX_TOKENS,
    )
