"""The database: one async SQLAlchemy engine over PostgreSQL (asyncpg) or SQLite (aiosqlite).

One code path serves both backends. Backend differences live here only:

- PostgreSQL: ``lock_timeout`` and ``statement_timeout`` are set once per connection
  (asyncpg ``server_settings``); single-statement reads run in autocommit mode (no
  BEGIN/ROLLBACK round trips); writers lock rows with ``SELECT … FOR UPDATE``.
- SQLite: WAL journal, ``busy_timeout``; writers start with ``BEGIN IMMEDIATE`` (one
  writer at a time, so concurrent edits wait instead of failing) and, inside one
  process, queue on an ``asyncio.Lock`` instead of spinning on the busy handler.

Driver and connection errors are mapped to ``DatabaseUnavailable``; a unique-constraint
violation is mapped to ``WriteConflict`` (the caller retries against fresh state).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.util import greenlet_spawn

from memory_store.errors import DatabaseUnavailable
from memory_store.migrate import schema_version, upgrade_to_head
from memory_store.records import DEFAULT_LIMITS, Limits
from memory_store.schema_probe import SQLITE_FILE_NAME, SchemaVersion

_BEGIN_OPTION = "warroom_begin"
_MIGRATION_LOCK_KEY = 7220417211  # any constant bigint shared by every migrating process
KEPT_DRIVER_CONNECTIONS = 1
"""Connections ``driver`` keeps checked out between uses, when the pool holds at least
``KEPT_DRIVER_MIN_POOL`` (a pool's checkout and check-in cost more than the hot
statement's own client time: ``bench/memory_store.py``)."""
KEPT_DRIVER_MIN_POOL = 4


@dataclass(frozen=True)
class Precompiled:
    """A statement compiled once to the driver's SQL (``Database.precompiled``).

    ``names`` are its bound parameters in the order of ``$1, $2, …``; ``defaults``
    the values the statement itself holds (literals). Values go to the driver as
    given: pass aware datetimes (what ``UtcDateTime`` would bind on PostgreSQL).
    """

    sql: str
    names: tuple[str, ...]
    defaults: Mapping[str, Any]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments for ``params`` (each name not given: its default).

        Raises:
            KeyError: a parameter with neither a value nor a default.
        """
        held = self.defaults
        if not held:
            return [params[n] for n in self.names]
        return [params[n] if n in params else held[n] for n in self.names]


class WriteConflict(Exception):
    """A unique constraint refused a row: another transaction got there first.

    Internal to ``memory_store``: the store retries against fresh state.
    """


class Database:
    """An async engine plus the transaction discipline the store relies on.

    Build it with ``Database.from_url``; call ``migrate()`` once at start and
    ``dispose()`` at shutdown. Other ``memory_store`` modules use ``read()``,
    ``write()`` and ``autocommit()``; nothing holds a connection between calls, except
    the one ``driver()`` keeps for the next hot statement.
    ``is_postgres`` tells the backend; ``engine`` is the SQLAlchemy engine.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        lock_timeout_ms: int = DEFAULT_LIMITS.lock_timeout_ms,
        kept_driver_connections: int = 0,
    ) -> None:
        """Wrap an engine made by ``from_url`` (its event hooks must be installed).

        ``lock_timeout_ms`` bounds the wait for SQLite's in-process writer queue;
        ``kept_driver_connections``: how many idle connections ``driver`` keeps.
        """
        self.engine = engine
        self.is_postgres = engine.dialect.name == "postgresql"
        self._keeps = kept_driver_connections
        self._kept: list[Any] = []  # the pool's proxied connections, idle, checked out
        # a database dropped without ``dispose`` ends its kept connection quietly (the
        # pool would warn of a connection never checked in, an error under pytest)
        weakref.finalize(self, _end_kept, self._kept)
        self._precompiled: dict[ClauseElement, Precompiled] = {}
        self._lock_timeout_s = lock_timeout_ms / 1000
        self._sqlite_writer = asyncio.Lock()

    @classmethod
    def from_url(
        cls,
        url: str | None,
        *,
        data_dir: Path,
        limits: Limits = DEFAULT_LIMITS,
        pool_size: int = 10,
        max_overflow: int = 20,
    ) -> Database:
        """A database for ``url``, or the embedded SQLite file when ``url`` is None.

        Args:
            url: ``postgresql://``, ``postgres://``, ``postgresql+asyncpg://``,
                ``sqlite:///…`` or ``sqlite+aiosqlite:///…``; None → the SQLite file
                ``warroom.sqlite3`` under ``data_dir`` (the directory is created).
            data_dir: where the embedded SQLite file lives.
            limits: ``lock_timeout_ms`` and ``statement_timeout_ms`` are applied to every
                connection (SQLite: ``busy_timeout``).
            pool_size: connections kept open; ``max_overflow`` more on demand.

        Raises:
            ValueError: a URL of another database kind.
        """
        if url is None:
            data_dir.mkdir(parents=True, exist_ok=True)
            url = f"sqlite+aiosqlite:///{data_dir / SQLITE_FILE_NAME}"
        sa_url = normalise_url(url)
        pool = {"pool_size": pool_size, "max_overflow": max_overflow}
        if sa_url.get_backend_name() == "postgresql":
            engine = create_async_engine(
                sa_url, connect_args=_postgres_connect_args(limits), **pool
            )
        else:
            engine = create_async_engine(sa_url, **pool)
            _install_sqlite_hooks(engine, busy_timeout_ms=limits.lock_timeout_ms)
        room = pool_size + max_overflow >= KEPT_DRIVER_MIN_POOL
        keeps = KEPT_DRIVER_CONNECTIONS if room else 0  # a small pool lends them all
        return cls(engine, lock_timeout_ms=limits.lock_timeout_ms, kept_driver_connections=keeps)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads; on PostgreSQL each statement is its own snapshot.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if self.is_postgres:
            async with self.autocommit() as conn:
                yield conn
            return
        with _mapped_errors():
            async with self.engine.connect() as conn:
                yield conn

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A PostgreSQL connection where each statement commits on its own.

        For reads, and for writes that are one atomic statement.

        Raises:
            RuntimeError: on SQLite (our SQLite transactions are started explicitly).
            WriteConflict: a unique constraint refused a row.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if not self.is_postgres:
            raise RuntimeError("autocommit connections are for PostgreSQL only")
        with _mapped_errors():
            async with self.engine.connect() as conn:
                yield await conn.execution_options(isolation_level="AUTOCOMMIT")

    def driver(self) -> DriverUse:
        """PostgreSQL: a pooled connection's own ``asyncpg.Connection``, for statements
        sent as ``Precompiled`` SQL (each its own transaction unless the caller opens one).

        For the hot statements (Slack's ack path, the file store's read and conditional
        write), where SQLAlchemy's execution of a statement costs more CPU than the
        driver's (``bench/slack_ack.py``, ``bench/memory_store.py``). The connection is
        checked out of the engine's pool as a raw DBAPI connection (no ``Connection``
        object, its events or transaction bookkeeping): the pool, its connection
        settings and the error mapping are the same as ``read``/``write``'s.

        Use it as ``async with db.driver() as conn``.

        Raises:
            RuntimeError: on SQLite.
            WriteConflict: an integrity constraint refused a row (as ``write``'s).
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if not self.is_postgres:
            raise RuntimeError("the driver's connection is for PostgreSQL only")
        return DriverUse(self)

    def precompiled(self, statement: ClauseElement) -> Precompiled:
        """``statement`` as PostgreSQL SQL for ``driver()``, compiled on first use and kept
        (give a statement built once, with ``bindparam``s for what varies)."""
        kept = self._precompiled.get(statement)
        if kept is None:
            compiled = statement.compile(dialect=self.engine.dialect)
            names = tuple(getattr(compiled, "positiontup", None) or ())  # SQLCompiler's
            # a bindparam without a value is required: no default (a missing one raises)
            binds = getattr(compiled, "binds", {})  # SQLCompiler's: name → BindParameter
            held = {n: v for n, v in compiled.params.items() if not binds[n].required}
            kept = Precompiled(compiled.string, names, held)
            self._precompiled[statement] = kept
        return kept

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A connection inside one write transaction, committed when the block ends.

        Keep the block short: it may hold row locks (PostgreSQL) or the write lock
        (SQLite). An exception rolls the transaction back.

        Raises:
            WriteConflict: a unique constraint refused a row (retry against fresh state).
            DatabaseUnavailable: the database could not be reached or a lock timed out.
        """
        if self.is_postgres:
            async with self._transaction() as conn:
                yield conn
            return
        async with self._sqlite_write_turn(), self._transaction("IMMEDIATE") as conn:
            yield conn

    @asynccontextmanager
    async def _sqlite_write_turn(self) -> AsyncIterator[None]:
        """This process's turn to write SQLite, waited for at most the lock timeout."""
        try:
            async with asyncio.timeout(self._lock_timeout_s):
                await self._sqlite_writer.acquire()
        except TimeoutError as exc:
            raise DatabaseUnavailable("timed out waiting to write the SQLite database") from exc
        try:
            yield
        finally:
            self._sqlite_writer.release()

    @asynccontextmanager
    async def _transaction(self, begin: str = "") -> AsyncIterator[AsyncConnection]:
        with _mapped_errors():
            async with self.engine.connect() as conn:
                if begin:
                    conn = await conn.execution_options(**{_BEGIN_OPTION: begin})
                async with conn.begin():
                    yield conn

    async def migrate(self) -> None:
        """Upgrade the schema to the newest Alembic revision (idempotent).

        On PostgreSQL concurrent callers queue on an advisory lock.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        async with self.write() as conn:
            if self.is_postgres:
                await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_KEY})")
            await conn.run_sync(upgrade_to_head)

    async def schema_version(self) -> SchemaVersion:
        """The schema's current and newest revision (``at_head`` False: run ``migrate``).

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        async with self.read() as conn:
            return await conn.run_sync(schema_version)

    async def dispose(self) -> None:
        """Close every pooled connection. The object must not be used afterwards."""
        kept, self._kept, self._keeps = self._kept, [], 0
        for pooled in kept:
            await greenlet_spawn(pooled.close)
        await self.engine.dispose()


class DriverUse:
    """One use of ``Database.driver``: checks a connection out on entry (the kept one when
    it is still idle) and, on exit, keeps it for the next hot statement or gives it back
    to the pool, mapping driver errors as ``driver`` documents. A class, not a generator
    context manager: it is entered on every hot statement (``bench/memory_store.py``)."""

    __slots__ = ("_db", "_pooled", "_raw")

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pooled: Any = None
        self._raw: Any = None

    async def __aenter__(self) -> Any:
        db = self._db
        kept = db._kept.pop() if db._kept else None
        if kept is not None and not _idle(kept.driver_connection):  # closed meanwhile (a
            await greenlet_spawn(kept.invalidate)  # restart the pool has seen): never again
            await greenlet_spawn(kept.close)
            kept = None
        self._pooled = kept if kept is not None else await _checkout(db.engine)
        self._raw = self._pooled.driver_connection
        return self._raw

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _tb: Any
    ) -> None:
        pooled, self._pooled = self._pooled, None
        if error is None:  # the hot case, without the error mapping's work
            db, raw = self._db, self._raw
            if len(db._kept) < db._keeps and not raw.is_closed() and not raw.is_in_transaction():
                db._kept.append(pooled)  # kept for the next hot statement
                return
            await self._release(pooled, clean=True)
            return
        import asyncpg  # PostgreSQL's driver: SQLAlchemy's dialect imports it too

        clean = isinstance(error, asyncpg.IntegrityConstraintViolationError)
        try:
            if clean:
                raise WriteConflict(str(error)) from error  # the statement ended: conn fine
            if isinstance(error, asyncpg.InterfaceError | OSError | TimeoutError):
                await greenlet_spawn(pooled.invalidate, error)  # never handed out again
                raise DatabaseUnavailable(f"database error: {error}") from error
            if isinstance(error, asyncpg.PostgresError):
                raise DatabaseUnavailable(f"database error: {error}") from error
        finally:
            await self._release(pooled, clean=clean)

    async def _release(self, pooled: Any, *, clean: bool) -> None:
        db, raw = self._db, pooled.driver_connection
        if clean and len(db._kept) < db._keeps and _idle(raw):
            db._kept.append(pooled)  # kept for the next hot statement
            return
        if not raw.is_closed() and raw.is_in_transaction():  # the pool's reset would
            await greenlet_spawn(pooled.invalidate)  # not end a raw BEGIN
        await greenlet_spawn(pooled.close)  # back to the pool (may await: overflow)


async def _checkout(engine: AsyncEngine) -> Any:
    """A connection of ``engine``'s pool, as the pool's proxy of the driver's connection."""
    import asyncpg

    with _mapped_errors():
        try:
            return await greenlet_spawn(engine.sync_engine.raw_connection)
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            raise DatabaseUnavailable(f"database error: {error}") from error


def _end_kept(kept: list[Any]) -> None:
    """At collection (or exit) of a database never disposed: take its kept connections
    out of the pool and end them without waiting (no event loop may be running)."""
    while kept:
        pooled = kept.pop()
        with contextlib.suppress(Exception):  # a closed loop, a connection already gone
            pooled.detach()
            pooled.dbapi_connection.terminate()


def _idle(raw: Any) -> bool:
    """Whether the driver's connection is open and outside any transaction (so it can be
    kept for another statement as the pool would hand it out)."""
    return not raw.is_closed() and not raw.is_in_transaction()


def normalise_url(url: str) -> URL:
    """The SQLAlchemy async URL for a database URL.

    >>> normalise_url("postgres://u@h:5432/db").render_as_string(hide_password=False)
    'postgresql+asyncpg://u@h:5432/db'
    >>> normalise_url("sqlite:///data/w.sqlite3").drivername
    'sqlite+aiosqlite'

    Raises:
        ValueError: not a PostgreSQL or SQLite URL.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        raise ValueError(f"not a database URL: {url!r}") from error
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg")
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    raise ValueError(f"unsupported database {backend!r}: use PostgreSQL or SQLite")


def _postgres_connect_args(limits: Limits) -> dict[str, Any]:
    return {
        "server_settings": {
            "lock_timeout": str(limits.lock_timeout_ms),
            "statement_timeout": str(limits.statement_timeout_ms),
            "idle_in_transaction_session_timeout": str(limits.statement_timeout_ms * 6),
        }
    }


def _install_sqlite_hooks(engine: AsyncEngine, *, busy_timeout_ms: int) -> None:
    """SQLAlchemy's recipe for SQLite transactions: the driver emits no BEGIN, we do."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in (
            "PRAGMA journal_mode=WAL",
            f"PRAGMA busy_timeout={busy_timeout_ms}",
            "PRAGMA synchronous=NORMAL",
            "PRAGMA foreign_keys=ON",
        ):
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get(_BEGIN_OPTION, '')}")


@contextmanager
def _mapped_errors() -> Iterator[None]:
    """Translate driver exceptions raised inside the block into our own."""
    try:
        yield
    except exc.IntegrityError as error:
        raise WriteConflict(str(error.orig)) from error
    except (exc.DBAPIError, exc.TimeoutError, OSError, TimeoutError) as error:
        raise DatabaseUnavailable(f"database error: {error}") from error
