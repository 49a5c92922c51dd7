"""Shared test fixtures: real PostgreSQL and Redis, found or refused loudly.

Tests that need a service request the ``postgres_url`` or ``redis_url`` fixture. When
the service is down they are skipped with a loud reason, unless ``CI`` is set, in
which case they fail (a CI run must never silently skip them).

Environment:
    WARROOM_TEST_PG_ADMIN_URL  admin DSN (default postgresql://postgres@127.0.0.1:5432/postgres)
    WARROOM_TEST_REDIS_URL     (default redis://127.0.0.1:6379/15); under pytest-xdist
                               (``-n 4``) worker ``gwN`` uses the database N below it, so
                               parallel workers never flush each other's data
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests import leaks

PG_ADMIN_URL = os.environ.get(
    "WARROOM_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _redis_url_of_this_worker(url: str, worker: str | None) -> str:
    """``url`` with its database number lowered by the xdist worker's index.

    >>> _redis_url_of_this_worker("redis://127.0.0.1:6379/15", "gw1")
    'redis://127.0.0.1:6379/14'
    >>> _redis_url_of_this_worker("redis://127.0.0.1:6379/15", None)
    'redis://127.0.0.1:6379/15'
    """
    if not worker or not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) - int(worker.removeprefix("gw"))
    if database < 0:
        raise ValueError(f"{url}: too few Redis databases below it for xdist worker {worker}")
    return urlunsplit(parts._replace(path=f"/{database}"))


REDIS_URL = _redis_url_of_this_worker(
    os.environ.get("WARROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
    os.environ.get("PYTEST_XDIST_WORKER"),
)


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), 1.0):
            return True
    except OSError:
        return False


def missing(message: str) -> NoReturn:
    """Skip loudly, or fail when ``CI`` is set (a CI run must never pass by skipping)."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(f"!!! SKIPPED: {message}")


def require_service(name: str, url: str) -> None:
    """Skip (locally) or fail (with CI set) when a service is unreachable."""
    if not _reachable(url):
        missing(f"{name} is not reachable at {url}: start it (see .ci/run) to run this test")


def require_bwrap() -> None:
    """Skip (locally) or fail (with CI set) when bubblewrap is not installed.

    The one place the tests look for ``bwrap``; tests that run a jail call it (or carry the
    ``bwrap`` marker, which calls it before the test).
    """
    if shutil.which("bwrap") is None:
        missing("bubblewrap (bwrap) is not installed: .ci/run installs it")


SLOW_PATHS = (
    "tests/bot/cli/",  # each test runs the ``warroom`` CLI as a subprocess
    "tests/bot/drill/",  # whole scripted incidents
    "tests/bot/durable/test_workers.py",  # real Dramatiq worker processes
    "tests/bot/durable/test_approval_workers.py",  # the same, with approvals clicked
    "tests/bot/durable/test_long_work.py",
    "tests/sandbox_client/gateway/",  # a real Prometheus (TLS, basic auth) per test
    "tests/bot/test_egress.py",  # the same, through a session
    "tests/harness/mcp/",  # real MCP servers (Node, Python) started per test
    "tests/harness/tools/test_mcp_call.py",
    "tests/harness/loop/test_step_mcp.py",
)
"""Tests marked ``slow`` by where they live: ``pytest -m "not slow"`` is the inner loop."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests under ``SLOW_PATHS`` ``slow``."""
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix()
        if where.startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


_OWN_BASETEMP = pytest.StashKey[Path]()
_RUN_TMP = "WARROOM_TEST_TMP"
"""The run's temporary directory (``TMPDIR`` of its every process), set by the first."""
_STARTED_TICKS = pytest.StashKey[int]()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default in ``pyproject.toml``): two xdist workers per core, 2 to 8.

    Most tests wait on sockets, jails, worker processes and the database rather than on a
    core, so twice the cores overlap well (measured on two cores: ``-n 4`` ran the fast
    tests in 80 s against 101 s with ``-n 2`` and several minutes serially); eight keeps
    the Redis databases the workers use (``WARROOM_TEST_REDIS_URL``'s and the 7 below)
    within Redis's default 16. ``-n 0`` runs serially, ``-n N`` any other count."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


def pytest_configure(config: pytest.Config) -> None:
    """Mark this run's processes (``tests/leaks.py``); xdist workers inherit the mark.

    The run's temporary directories go under a short ``/tmp/wr…`` (xdist adds
    ``popen-gwN/`` to each path): a local sandbox's Unix socket path must stay within the
    kernel's 108 bytes (``sun_path``), and pytest's own ``pytest-of-<user>/pytest-<n>/`` base
    leaves too little for a test's data directory below it. So do the directories tests
    make with ``tempfile`` (``TMPDIR`` is ``/tmp/wr…t``, beside it, for the run's every
    process): the jails of the run are then those whose state directory is below one of
    them (``leaks.leftover_processes``), not another run's of the same checkout."""
    leaks.run_id()
    config.stash[_STARTED_TICKS] = leaks.run_started_ticks()
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="wr")
        config.stash[_OWN_BASETEMP] = Path(config.option.basetemp)
        run_tmp = Path(f"{config.option.basetemp}t")  # beside it: pytest empties the base
        run_tmp.mkdir(mode=0o700)
        os.environ[_RUN_TMP] = str(run_tmp)
    if os.environ.get(_RUN_TMP):  # (an xdist worker computed its own before this)
        os.environ["TMPDIR"] = tempfile.tempdir = os.environ[_RUN_TMP]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when it left a process, a jail, a database or a Redis key behind.

    Runs once, in the process that started the run (not in xdist workers), after every
    test and fixture is done; what it finds is reported, removed, and makes the exit
    status 1 (``tests/leaks.py``)."""
    if hasattr(session.config, "workerinput"):
        return
    run = leaks.run_id()
    workers = getattr(session.config.option, "numprocesses", None) or 0
    base_redis = os.environ.get("WARROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    found = [
        *leaks.leftover_processes(
            run,
            session.config.stash.get(_STARTED_TICKS, 1 << 62),
            _run_dirs(session.config),
        ),
        *leaks.leftover_databases(PG_ADMIN_URL, run),
        *leaks.leftover_redis_keys(leaks.redis_urls(base_redis, int(workers))),
    ]
    own_basetemp = session.config.stash.get(_OWN_BASETEMP, None)
    if not found:
        if own_basetemp is not None and session.exitstatus == 0:
            for directory in _run_dirs(session.config):
                shutil.rmtree(directory, ignore_errors=True)
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"  {item.kind}: {item.what}" for item in found]
    if exitstatus == pytest.ExitCode.INTERRUPTED:  # cut short: its tests had no chance to clean
        message = "\n".join(["the interrupted run's leftovers, now removed:", *lines])
        if reporter is not None:
            reporter.write_line(message)
        return
    message = "\n".join(["the test run left these behind (now removed):", *lines])
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("!", "leftovers", red=True)
        reporter.write_line(message)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _run_dirs(config: pytest.Config) -> tuple[Path, ...]:
    """The run's own temporary directories: its base and ``TMPDIR`` (none when the base
    was given on the command line)."""
    base = config.stash.get(_OWN_BASETEMP, None)
    return () if base is None else (base, Path(f"{base}t"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Apply the ``bwrap`` marker: the test needs a real bubblewrap jail."""
    if item.get_closest_marker("bwrap") is not None:
        require_bwrap()


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test run (dropped afterwards).

    Yields a SQLAlchemy URL using asyncpg: ``postgresql+asyncpg://…/warroom_test_<run>_<hex>``.
    """
    require_service("PostgreSQL", PG_ADMIN_URL)
    from tests import pg_admin as admin

    name = leaks.database_name()
    admin.create_database(PG_ADMIN_URL, name)
    try:
        url = _with_database(PG_ADMIN_URL, name)
        yield url.replace("postgresql://", "postgresql+asyncpg://", 1)
    finally:
        admin.drop_database(PG_ADMIN_URL, name)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The Redis URL for tests (database 15 by default), emptied when the run is done with it
    (Dramatiq's brokers leave their consumers' heartbeats behind)."""
    require_service("Redis", REDIS_URL)
    yield REDIS_URL
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.flushdb()
    finally:
        client.close()
