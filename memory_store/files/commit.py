"""The one transaction that appends a version: lock the row, decide, update, log.

Every change (write, edit, delete, restore) goes through ``commit_change``:

1. lock the file's row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite writers are
   already serialised by ``BEGIN IMMEDIATE``), learning in the same statement whether
   this ``tool_use_id`` already changed the file — if so, return that first outcome;
2. let the operation decide against the *current* row (it may raise a store error,
   say "unchanged", or plan new content);
3. check the tree (case conflicts) and the org quota when a file is (re)created;
4. ``UPDATE … WHERE version = :current`` (guarded by the byte quota) or INSERT a new
   row, append the revision and count the change in the org's counters (a deletion
   gives back its file's allowances; a conditional write that found its file's allowance
   short tops it up: ``allowance``).

A quota is judged on the org's counters, which count allowances as used; a change they
would refuse first takes back the org's allowances (``allowance.reclaim``) and is judged
again.

A conditional whole-file write on PostgreSQL first tries one guarded statement
(``conditional``); only when it matches nothing does it take the steps above, which
then explain why (stale, unchanged, over quota, or a retried tool call).

A unique-constraint race (two creators of one path, a case-only twin, a duplicate
tool call) rolls back and retries against fresh state; the retry decides again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.db import Database, WriteConflict
from memory_store.errors import DatabaseUnavailable, QuotaExceeded, StoreError
from memory_store.files import allowance, retention, revisions, rows, usage
from memory_store.files.paths import check_tree, fold
from memory_store.records import Limits, Namespace, Origin, Revision, Scope

MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class Plan:
    """What an operation wants to store: new ``content`` (None = delete)."""

    operation: str
    content: str | None
    replacements: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What a change did (or, when ``unchanged``, found already true)."""

    path: str
    version: int
    base_version: int
    operation: str
    content: str | None
    replacements: int | None
    created: bool
    unchanged: bool = False


Decide = Callable[[rows.FileRow | None], Plan | Outcome]


@dataclass(frozen=True)
class Target:
    """Where a change goes and who makes it. ``allowance``: the change is a conditional
    write that found its file's allowance short (``allowance``): top it up with it."""

    ns: Namespace
    path: str
    origin: Origin
    top_up: bool = False


async def commit_change(
    db: Database,
    limits: Limits,
    target: Target,
    decide: Decide,
) -> Outcome:
    """Apply one change in one short transaction (see the module docstring).

    Raises:
        whatever ``decide`` raises; QuotaExceeded; CaseConflict/InvalidPath (tree clash);
        DatabaseUnavailable (unreachable, lock timeout, or conflicts that did not settle).
    """
    conflict: WriteConflict | None = None
    for _ in range(MAX_ATTEMPTS):
        try:
            async with db.write() as conn:
                return await _attempt(conn, limits, target, decide)
        except WriteConflict as exc:
            conflict = exc
    raise DatabaseUnavailable(f"{target.path}: kept conflicting with other writers") from conflict


async def _attempt(
    conn: AsyncConnection, limits: Limits, target: Target, decide: Decide
) -> Outcome:
    ns, path = target.ns, target.path
    row = await rows.lock_file(conn, ns, path, target.origin.tool_use_id)
    if row is not None and row.prior_version is not None:
        return outcome_of(await revisions.of_file(conn, row.id, row.prior_version))
    try:
        decided = decide(row)
    except StoreError:
        if prior := await _prior(conn, row, target.origin):
            return prior
        raise
    if isinstance(decided, Outcome):
        return await _prior(conn, row, target.origin) or decided
    live = row is not None and not row.deleted
    if decided.content is not None and not live:
        top = "/" + path.split("/")[1]
        check_tree(path, await rows.live_paths_folded(conn, ns, fold(top)))
        await _check_quota(conn, limits, ns, decided.content, creating=True)
    change = new_version(
        (row.version if row else 0) + 1,
        row.version if row is not None and live else 0,
        decided.operation,
        decided.content,
        target.origin,
        replacements=decided.replacements,
    )
    await _store(conn, limits, target, row, change)
    return outcome(path, change, created=not live)


async def _store(
    conn: AsyncConnection,
    limits: Limits,
    target: Target,
    row: rows.FileRow | None,
    change: rows.NewVersion,
) -> None:
    if row is None:
        file_id = await rows.insert_file(conn, target.ns, target.path, fold(target.path), change)
    elif await rows.update_from(conn, row, change, limits, target.ns):
        file_id = row.id
    else:
        # The row is locked at row.version, so only the byte-quota guard can refuse. The
        # guard reads the org's counter, which counts allowances: the check takes them back
        # (in this transaction) before it refuses, and then the update goes again.
        old_size = 0 if row.deleted else row.size_bytes
        await _check_quota(
            conn, limits, target.ns, change.content or "", old_size, creating=row.deleted
        )
        if not await rows.update_from(conn, row, change, limits, target.ns):
            raise WriteConflict(f"{target.path} moved past version {row.version}")
        file_id = row.id
    await revisions.append(conn, file_id, change)
    was_live = row is not None and not row.deleted
    old_size = row.size_bytes if row is not None and was_live else 0
    new_size = change.size_bytes
    org_id = target.ns.org_id
    # a deletion gives the file's allowances back (its row's are set to 0 with it)
    gives_back = (0, 0)
    if row is not None and change.content is None:
        gives_back = (row.allowance_bytes, row.allowance_stored_bytes)
    await usage.add(
        conn,
        org_id,
        files=int(change.content is not None) - int(was_live),
        size_bytes=new_size - old_size - gives_back[0],
        stored_bytes=new_size - gives_back[1],
    )
    keep = retention.keeps(limits.keep_revisions)
    if change.content is None:
        limit = limits.max_stored_bytes(target.ns.scope)
        stored = await usage.stored(conn, org_id)
        if stored > retention.PRESSURE * limit and any(await allowance.reclaim(conn, org_id)):
            stored = await usage.stored(conn, org_id)  # judged on use, not on allowances
        keep = retention.keeps(
            limits.keep_revisions, deleted=True, pressed=stored > retention.PRESSURE * limit
        )
    freed = await retention.drop_older(conn, org_id, file_id, change.version, keep)
    await _check_after(
        conn,
        limits,
        target.ns,
        added=(int(change.content is not None) - int(was_live), new_size - old_size),
        stored_added=new_size - freed,
    )
    if target.top_up and change.content is not None and row is not None:
        held = (row.allowance_bytes, row.allowance_stored_bytes)
        await allowance.top_up(conn, limits, target.ns, file_id, held)


async def _prior(conn: AsyncConnection, row: rows.FileRow | None, origin: Origin) -> Outcome | None:
    """The first outcome of this tool call, looked up in a fresh statement.

    ``lock_file`` already asks, but on PostgreSQL a statement that waited for the row
    lock judges its subqueries by the snapshot taken *before* the wait, so a duplicate
    call that committed meanwhile is only visible to a new statement. Asked only when
    the decision is "error" or "unchanged"; a change that would duplicate a tool call
    is stopped by the unique index instead (and retried, then answered here).
    """
    if row is None or not origin.tool_use_id:
        return None
    found = await revisions.by_tool_use(conn, row.id, origin.tool_use_id)
    return None if found is None else outcome_of(found)


def new_version(
    version: int,
    base_version: int,
    operation: str,
    content: str | None,
    origin: Origin,
    *,
    replacements: int | None = None,
) -> rows.NewVersion:
    return rows.NewVersion(
        version=version,
        base_version=base_version,
        operation=operation,
        content=content,
        replacements=replacements,
        origin=origin,
        at=datetime.now(UTC),
    )


def outcome(path: str, change: rows.NewVersion, *, created: bool) -> Outcome:
    return Outcome(
        path=path,
        version=change.version,
        base_version=change.base_version,
        operation=change.operation,
        content=change.content,
        replacements=change.replacements,
        created=created,
    )


def outcome_of(revision: Revision) -> Outcome:
    """The outcome a stored revision reported when it was made (for retried tool calls)."""
    return Outcome(
        path=revision.path,
        version=revision.version,
        base_version=revision.base_version,
        operation=revision.operation,
        content=revision.content,
        replacements=revision.replacements,
        created=revision.operation == "create",
    )


async def _check_quota(
    conn: AsyncConnection,
    limits: Limits,
    ns: Namespace,
    content: str,
    old_size: int = 0,
    *,
    creating: bool,
) -> None:
    """Refuse a new file, or growth, past the org's quota: an early look, before the
    change is made, without a lock (``_check_after`` judges again, exactly, once the
    change holds the org's counter row); growth of an existing file is also guarded
    inside its UPDATE (``rows``).
    """
    new_size = len(content.encode())
    files_used, bytes_used = await usage.read(conn, ns.org_id)
    max_files, max_bytes = limits.max_files(ns.scope), limits.max_bytes(ns.scope)
    note = "" if ns.scope is Scope.INCIDENT else _RESERVE_NOTE
    if creating and files_used + 1 > max_files:
        raise QuotaExceeded(ns.org_id, what="files", used=files_used, limit=max_files, note=note)
    over = new_size > old_size and bytes_used - old_size + new_size > max_bytes
    if over and any(await allowance.reclaim(conn, ns.org_id)):  # judged on use, not allowances
        files_used, bytes_used = await usage.read(conn, ns.org_id)
        over = bytes_used - old_size + new_size > max_bytes
    if over:
        raise QuotaExceeded(ns.org_id, what="bytes", used=bytes_used, limit=max_bytes, note=note)


async def _check_after(
    conn: AsyncConnection,
    limits: Limits,
    ns: Namespace,
    *,
    added: tuple[int, int],
    stored_added: int,
) -> None:
    """Refuse a change that added ``added`` (files, live bytes) and ``stored_added``
    bytes of kept revisions and so left the org over a quota of ``ns``'s scope: judged
    after the change, in its transaction, which holds the org's counter row, so
    concurrent changes are judged one after the other (``_check_quota``'s early look
    reads the row without a lock). Only what the change added is judged: a change that
    frees passes. Raising rolls the change back.
    """
    scope = ns.scope
    limit = (limits.max_files(scope), limits.max_bytes(scope), limits.max_stored_bytes(scope))
    grew = (added[0], added[1], stored_added)

    def over(counted: tuple[int, int, int]) -> int | None:
        """The first counter this change grew past its limit (0 files, 1 bytes, 2
        stored), or None."""
        return next((i for i in range(3) if grew[i] > 0 and counted[i] > limit[i]), None)

    counted = await usage.counters(conn, ns.org_id)
    if over(counted) is not None and any(await allowance.reclaim(conn, ns.org_id)):
        counted = await usage.counters(conn, ns.org_id)  # judged on use, not allowances
    which = over(counted)
    if which is None:
        return
    what = ("files", "bytes", "stored bytes")[which]
    note = _FREE_NOTE if which == 2 else "" if scope is Scope.INCIDENT else _RESERVE_NOTE
    before = counted[which] - grew[which]
    raise QuotaExceeded(ns.org_id, what=what, used=before, limit=limit[which], note=note)


_FREE_NOTE = (
    " (every kept version of every file counts); delete files that are no longer useful"
    " (`/agent memory rm /memory/<path>` in Slack, `warroom memory rm` from a shell): while"
    " storage is this full, a deleted file keeps only its last version"
)
_RESERVE_NOTE = (
    " (the rest is kept for /incident notes); delete files from /memory that are no longer"
    " useful (`warroom memory ls` and `warroom memory rm`)"
)
