"""``INSERT … ON CONFLICT`` for both backends from one call site.

PostgreSQL and SQLite (≥ 3.24) share the syntax; SQLAlchemy spells it through each
dialect's own ``insert`` construct, so we pick the construct by backend here.
"""

from __future__ import annotations

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite

Insert = postgresql.Insert | sqlite.Insert


def insert(table: Table, *, is_postgres: bool) -> Insert:
    """An ``INSERT`` into ``table`` that supports ``on_conflict_do_nothing``/``_update``."""
    return postgresql.insert(table) if is_postgres else sqlite.insert(table)
