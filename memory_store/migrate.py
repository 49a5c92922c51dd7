"""Running the Alembic migrations that ship inside the package (no alembic.ini needed)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from memory_store.schema_probe import SchemaVersion

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


def schema_version(connection: Connection) -> SchemaVersion:
    """The schema's revision and the newest one, over a sync connection (via ``run_sync``)."""
    current = MigrationContext.configure(connection).get_current_revision()
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    return SchemaVersion(current=current, head=head or "")
