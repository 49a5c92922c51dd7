"""Create and drop throwaway PostgreSQL databases for tests, through asyncpg."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg


async def _run(admin_url: str, statement: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def create_database(admin_url: str, name: str) -> None:
    """CREATE DATABASE ``name`` (an identifier we generated; no quoting issues)."""
    asyncio.run(_run(admin_url, f'CREATE DATABASE "{name}"'))


def drop_database(admin_url: str, name: str) -> None:
    """DROP DATABASE ``name`` WITH (FORCE): ends leftover connections first."""
    asyncio.run(_run(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.contextmanager
def throwaway_database(admin_url: str) -> Iterator[str]:
    """A fresh, empty database on ``admin_url``'s server, as a ``postgresql://`` URL,
    dropped afterwards (named as ``tests.leaks`` expects, so a leftover is reported)."""
    from tests import leaks

    name = leaks.database_name()
    create_database(admin_url, name)
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        drop_database(admin_url, name)
