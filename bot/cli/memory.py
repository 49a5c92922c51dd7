"""``warroom memory ls|rm``: list and prune an org's ``/memory`` from the shell.

Memory shares the org's file quota with ``/skills``; ``/incident`` keeps a reserve of
its own (``memory_store.Limits``). When memory is full, list it and delete what is no
longer useful: a deletion is a tombstone revision, so the history stays and a file can
be restored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:
    from memory_store import Entry, FileStore

memory_app = typer.Typer(
    help="List and prune the org's shared /memory files.", no_args_is_help=True
)
ROOT = "/memory"
T = TypeVar("T")
OrgOption = Annotated[
    str | None,
    typer.Option("--org", help="Org id. Default: the bot token's org, else 'local'."),
]


@memory_app.command("ls")
def memory_ls(
    directory: Annotated[str, typer.Argument(help="A directory under /memory.")] = ROOT,
    org: OrgOption = None,
) -> None:
    """List /memory files (bytes, last change in UTC, path), then the org's usage."""
    try:
        inside(directory)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="DIRECTORY") from exc
    org_id, (entries, (files, size), stored) = _with_store(org, lambda s, o: _list(s, o, directory))
    typer.echo(f"org {org_id}:")
    for e in entries:
        typer.echo(f"{e.size_bytes or 0:>9}  {e.updated_at:%Y-%m-%d %H:%M}  {ROOT}{e.path}")
    total = sum(e.size_bytes or 0 for e in entries)
    typer.echo(f"{len(entries)} file(s), {total} bytes here")
    typer.echo(f"the org's quota counts {files} file(s), {size} bytes")
    typer.echo(f"its kept history (every version, of every scope) holds {stored} bytes")


@memory_app.command("rm")
def memory_rm(
    paths: Annotated[list[str], typer.Argument(help="Files under /memory to delete.")],
    org: OrgOption = None,
) -> None:
    """Delete /memory files (their history is kept); exit 1 if any could not be deleted."""
    org_id, results = _with_store(org, lambda s, o: _remove(s, o, paths))
    typer.echo(f"org {org_id}:")
    for path, problem in results:
        said = "deleted" if problem is None else f"not deleted: {problem}"
        typer.echo(f"  {path}: {said}")
    if any(problem is not None for _, problem in results):
        raise typer.Exit(1)


def inside(path: str) -> str:
    """The store path of a ``/memory`` path.

    >>> inside("/memory/teams/a.md"), inside("/memory")
    ('/teams/a.md', '/')

    Raises:
        ValueError: the path is not under /memory.
    """
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ValueError(f"{path} is not under {ROOT}")
    return path.removeprefix(ROOT) or "/"


async def _list(
    store: FileStore, org_id: str, directory: str
) -> tuple[list[Entry], tuple[int, int], int]:
    from memory_store import Namespace, Scope

    entries = await store.glob(Namespace(org_id, Scope.MEMORY), "**", inside(directory))
    listed = sorted(entries, key=lambda e: e.path)
    return listed, await store.usage(org_id), await store.stored_usage(org_id)


async def _remove(store: FileStore, org_id: str, paths: list[str]) -> list[tuple[str, str | None]]:
    from memory_store import Namespace, Origin, Scope, StoreError

    ns = Namespace(org_id, Scope.MEMORY)
    results: list[tuple[str, str | None]] = []
    for path in paths:
        try:
            await store.delete(ns, inside(path), Origin("cli"))
        except (StoreError, ValueError) as exc:
            results.append((path, str(exc)))
        else:
            results.append((path, None))
    return results


def _with_store(org: str | None, work: Callable[[FileStore, str], Awaitable[T]]) -> tuple[str, T]:
    """Run ``work`` on the configured database (migrated first) for the org."""
    from bot.cli.app import _default_org, _run, _settings
    from memory_store import Database, FileStore

    settings = _settings()

    async def run() -> tuple[str, T]:
        db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
        try:
            await db.migrate()
            org_id = org or await _default_org(settings)
            return org_id, await work(FileStore(db), org_id)
        finally:
            await db.dispose()

    return _run(lambda: asyncio.run(run()))
