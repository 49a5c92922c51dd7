"""Create and drop throwaway PostgreSQL databases for tests, through asyncpg."""

from __future__ import annotations

import asyncio

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
