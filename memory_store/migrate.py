"""Running the Alembic migrations that ship inside the package (no alembic.ini needed)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at ``memory_store/migrations``.

    With ``connection``, ``env.py`` migrates over it (inside its transaction).
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade_to_head(connection: Connection) -> None:
    """Upgrade to the newest revision over a sync connection (run via ``run_sync``)."""
    command.upgrade(alembic_config(connection), "head")
