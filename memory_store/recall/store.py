"""Past incidents of an org: their summaries, full-text search over them, who may see which,
and what each session was given at its start (docs/architecture.md §17).

An incident is a channel of an org (``Scope.INCIDENT``). Once its summary is recorded
(``record``) it is a *past incident* others can find: ``related`` searches the summaries
(PostgreSQL: the weighted ``tsvector`` and ``ts_rank``; SQLite: FTS5 and ``bm25``), then
re-ranks the best candidates so that an alert's services weigh more than prose.

Visibility (``Viewer``): an org's incidents are visible to its sessions only; an incident
of a private channel (``mark_private``) is visible to sessions of that same channel only,
unless the org allows private-channel incidents org-wide (``private_org_wide``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.files import listing
from memory_store.files.grep import compile_pattern, search
from memory_store.files.lean import PathRow
from memory_store.files.paths import normalise_path
from memory_store.files.prefilter import required_literal
from memory_store.files.rows import aware
from memory_store.recall.tables import (
    incident_recall,
    incident_services,
    private_channels,
    related_given,
)
from memory_store.records import Entry, FileMatches, Scope
from memory_store.sessions.tables import sessions
from memory_store.upsert import insert

CANDIDATES = 50
"""How many full-text candidates the database ranks before the re-rank by services."""
SERVICE_WEIGHT = 2.0
"""Score of each service an incident shares with the query (text scores are in [0, 1])."""
BY_SERVICE_MAX = 500
"""The newest incidents of the query's services that are scored (bounds a busy service's cost)."""
MIN_SHARED_WORDS = 2
"""A candidate sharing no service must share at least this many query words."""
_WORD = re.compile(r"[a-z0-9]+")
_DATE_DIR = re.compile(r"^(\d{4}-\d{2}-\d{2})-(.+)$")


@dataclass(frozen=True)
class IncidentSummary:
    """The structured summary of an incident (``/incident/summary.md``).

    ``services`` are lower-case names (``checkout-api``); ``links`` URLs or paths.
    """

    title: str
    services: tuple[str, ...] = ()
    symptoms: str = ""
    root_cause: str = ""
    fix: str = ""
    links: tuple[str, ...] = ()


@dataclass(frozen=True)
class PastIncident:
    """A recorded incident: its channel, the date it started (UTC), its summary, the
    version of ``/incident/summary.md`` it was read from (0: drafted), and whether its
    channel is private."""

    org_id: str
    channel_id: str
    started_at: datetime
    summary: IncidentSummary
    summary_version: int = 0
    private: bool = False

    @property
    def dir_name(self) -> str:
        """Its folder under ``/incidents``: ``<YYYY-MM-DD>-<channel id>`` (stable: the start
        date never changes once recorded)."""
        return f"{self.started_at:%Y-%m-%d}-{self.channel_id}"


@dataclass(frozen=True)
class Related:
    """A past incident found for a query, with its score (higher is closer)."""

    incident: PastIncident
    score: float


@dataclass(frozen=True)
class Viewer:
    """Who looks: a session of ``org_id`` started in ``channel_id``. ``private_org_wide``
    is the org's setting letting every channel see private channels' incidents."""

    org_id: str
    channel_id: str
    private_org_wide: bool = False


@dataclass(frozen=True)
class RecallQuery:
    """What to search for: ``services`` (an alert's service labels, weighing more) and
    ``words`` (the prose). Both are matched case-insensitively, word by word."""

    services: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class Given:
    """What one session was given at its start: its thread and the items (JSON objects
    the harness wrote: title, date, channel, fix, path, links)."""

    session_id: str
    thread_ts: str
    given_at: datetime
    items: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class IncidentFile:
    """A live note of a visible past incident: (its folder, the path in it, …)."""

    dir_name: str
    path: str
    content: str
    updated_at: datetime
    size_bytes: int


STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "please",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "up",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "alert",
        "alerts",
        "firing",
        "fired",
        "issue",
        "incident",
        "incidents",
        "check",
        "look",
        "looks",
        "help",
        "see",
        "seeing",
        "now",
        "again",
        "since",
        "today",
        "prod",
        "production",
        "error",
        "errors",
        "high",
        "service",
        "services",
    ]
)
"""Words that say nothing about which incident it is (they never count as shared)."""


def words_of(text_: str) -> list[str]:
    """Lower-case words of ``text_`` (letters and digits), stop words left out.

    >>> words_of("Checkout-API: 500s since the 14:02 deploy")
    ['checkout', 'api', '500s', '14', '02', 'deploy']
    """
    return [w for w in _WORD.findall(text_.lower()) if w not in STOP_WORDS]


def _stem(word: str) -> str:
    """A crude stem (first six characters) to count shared words across inflections."""
    return word[:6]


class RecallStore:
    """Past incidents' rows. Every method may raise ``DatabaseUnavailable``."""

    def __init__(self, db: Database, clock: Clock = utc_now) -> None:
        """A store over ``db`` (migrated); ``clock`` stamps rows (UTC)."""
        self._db = db
        self._clock = clock

    # ------------------------------------------------------------ writing

    async def record(
        self,
        org_id: str,
        channel_id: str,
        summary: IncidentSummary,
        *,
        summary_version: int = 0,
        started_at: datetime | None = None,
    ) -> PastIncident:
        """Record (or replace) the summary of the incident of ``channel_id`` and index it.

        The start date is fixed by the first record: ``started_at``, else the channel's
        first session's creation time, else now; later records keep it, so the folder
        name never changes.
        """
        async with self._db.write() as conn:
            return await self._record(
                conn, org_id, channel_id, summary, summary_version, started_at
            )

    async def record_many(
        self, org_id: str, incidents: Sequence[tuple[str, IncidentSummary, datetime]]
    ) -> None:
        """Record each (channel, summary, start date) of ``org_id`` in one transaction, in
        bulk (imports, benchmarks); a channel already recorded is replaced, its start date
        kept. On SQLite the org's full-text rows are rebuilt."""
        now = self._clock()
        rows = [
            {
                "org_id": org_id,
                "channel_id": channel_id,
                "started_at": started_at,
                "title": summary.title,
                "services": " ".join(summary.services),
                "symptoms": summary.symptoms,
                "root_cause": summary.root_cause,
                "fix": summary.fix,
                "links": "\n".join(summary.links),
                "summary_version": 0,
                "updated_at": now,
            }
            for channel_id, summary, started_at in incidents
        ]
        if not rows:
            return
        statement = insert(incident_recall, is_postgres=self._db.is_postgres)
        replaced = {
            name: getattr(statement.excluded, name)
            for name in (
                "title",
                "services",
                "symptoms",
                "root_cause",
                "fix",
                "links",
                "summary_version",
                "updated_at",
            )
        }
        upsert = statement.on_conflict_do_update(
            index_elements=["org_id", "channel_id"], set_=replaced
        )
        names = [
            {"org_id": org_id, "service": name, "channel_id": channel_id}
            for channel_id, summary, _ in incidents
            for name in dict.fromkeys(summary.services)
        ]
        channels = [channel_id for channel_id, _, _ in incidents]
        async with self._db.write() as conn:
            await conn.execute(upsert, rows)
            for start in range(0, len(channels), 500):
                await conn.execute(
                    delete(incident_services).where(
                        incident_services.c.org_id == org_id,
                        incident_services.c.channel_id.in_(channels[start : start + 500]),
                    )
                )
            if names:
                await conn.execute(incident_services.insert(), names)
            if not self._db.is_postgres:
                await conn.execute(text(_SQLITE_DROP_ORG), {"org": org_id})
                await conn.execute(text(_SQLITE_INDEX_ORG), {"org": org_id})

    async def _record(
        self,
        conn: AsyncConnection,
        org_id: str,
        channel_id: str,
        summary: IncidentSummary,
        summary_version: int,
        started_at: datetime | None,
    ) -> PastIncident:
        now = self._clock()
        values = {
            "title": summary.title,
            "services": " ".join(summary.services),
            "symptoms": summary.symptoms,
            "root_cause": summary.root_cause,
            "fix": summary.fix,
            "links": "\n".join(summary.links),
            "summary_version": summary_version,
            "updated_at": now,
        }
        if started_at is None:
            first = await conn.scalar(
                select(func.min(sessions.c.created_at)).where(
                    sessions.c.org_id == org_id, sessions.c.channel_id == channel_id
                )
            )
            started_at = aware(_when(first)) if first is not None else now
        statement = insert(incident_recall, is_postgres=self._db.is_postgres).values(
            org_id=org_id, channel_id=channel_id, started_at=started_at, **values
        )
        await conn.execute(
            statement.on_conflict_do_update(index_elements=["org_id", "channel_id"], set_=values)
        )
        if not self._db.is_postgres:
            await _index_sqlite(conn, org_id, channel_id, summary)
        await conn.execute(
            delete(incident_services).where(
                incident_services.c.org_id == org_id, incident_services.c.channel_id == channel_id
            )
        )
        if summary.services:
            await conn.execute(
                incident_services.insert(),
                [
                    {"org_id": org_id, "service": name, "channel_id": channel_id}
                    for name in dict.fromkeys(summary.services)
                ],
            )
        kept = await conn.scalar(
            select(incident_recall.c.started_at).where(
                incident_recall.c.org_id == org_id, incident_recall.c.channel_id == channel_id
            )
        )
        return PastIncident(org_id, channel_id, aware(_when(kept)), summary, summary_version)

    async def mark_private(self, org_id: str, channel_id: str) -> None:
        """Remember that ``channel_id`` is private (idempotent)."""
        async with self._db.write() as conn:
            statement = insert(private_channels, is_postgres=self._db.is_postgres).values(
                org_id=org_id, channel_id=channel_id, marked_at=self._clock()
            )
            await conn.execute(statement.on_conflict_do_nothing())

    async def note_given(
        self,
        session_id: str,
        org_id: str,
        channel_id: str,
        items: Sequence[Mapping[str, Any]],
        *,
        thread_ts: str | None = None,
    ) -> None:
        """Keep what session ``session_id`` was given at its start (the first record wins:
        a step run again gives the same items). ``thread_ts`` None: the session row's."""
        async with self._db.write() as conn:
            if thread_ts is None:
                thread_ts = await conn.scalar(
                    select(sessions.c.thread_ts).where(sessions.c.id == session_id)
                )
            statement = insert(related_given, is_postgres=self._db.is_postgres).values(
                session_id=session_id,
                org_id=org_id,
                channel_id=channel_id,
                thread_ts=thread_ts or "",
                given_at=self._clock(),
                items=json.dumps(list(items), sort_keys=True),
            )
            await conn.execute(statement.on_conflict_do_nothing())

    # ------------------------------------------------------------ reading

    async def given(self, org_id: str, channel_id: str, *, limit: int = 20) -> list[Given]:
        """What the channel's sessions were given at their start, newest first."""
        g = related_given.c
        query = (
            select(g.session_id, g.thread_ts, g.given_at, g["items"])
            .where(g.org_id == org_id, g.channel_id == channel_id)
            .order_by(g.given_at.desc(), g.session_id)
            .limit(limit)
        )
        async with self._db.read() as conn:
            found = (await conn.execute(query)).all()
        return [Given(r[0], r[1], aware(r[2]), tuple(json.loads(r[3]))) for r in found]

    async def incidents(self, viewer: Viewer) -> list[PastIncident]:
        """Every past incident ``viewer`` may see, newest first."""
        async with self._db.read() as conn:
            found = await conn.execute(
                text(_LIST + " ORDER BY r.started_at DESC, r.channel_id"), _seen_by(viewer)
            )
        return [_incident(viewer.org_id, row) for row in found.all()]

    async def incident(self, viewer: Viewer, dir_name: str) -> PastIncident | None:
        """The past incident in folder ``dir_name`` if ``viewer`` may see it, else None."""
        parts = _DATE_DIR.match(dir_name)
        if parts is None:
            return None
        params = {**_seen_by(viewer), "channel": parts.group(2)}
        async with self._db.read() as conn:
            row = (await conn.execute(text(_LIST + " AND r.channel_id = :channel"), params)).first()
        if row is None:
            return None
        found = _incident(viewer.org_id, row)
        return found if found.dir_name == dir_name else None

    async def files(
        self,
        viewer: Viewer,
        dir_name: str | None = None,
        *,
        containing: str | None = None,
        ignore_case: bool = False,
        with_content: bool = True,
    ) -> list[IncidentFile]:
        """Live notes (``/incident/`` files) of the past incidents ``viewer`` may see (or of
        the one in ``dir_name``), in one statement; ``containing``: only files holding this
        text (a superset when the case is ignored)."""
        params: dict[str, Any] = {**_seen_by(viewer), "scope": Scope.INCIDENT.value}
        where = ""
        if dir_name is not None:
            parts = _DATE_DIR.match(dir_name)
            if parts is None:
                return []
            where += " AND r.channel_id = :channel"
            params["channel"] = parts.group(2)
        if containing:
            column = "lower(f.content)" if ignore_case else "f.content"
            where += f" AND {column} LIKE :like ESCAPE '\\'"
            needle = containing.lower() if ignore_case else containing
            params["like"] = "%" + re.sub(r"([\\%_])", r"\\\1", needle) + "%"
        content = "f.content" if with_content else "''"
        statement = (
            f"SELECT r.channel_id, r.started_at, f.path, {content}, f.updated_at, f.size_bytes "
            "FROM incident_recall r JOIN files f ON f.org_id = r.org_id "
            "AND f.scope = :scope AND f.channel_id = r.channel_id AND NOT f.deleted "
            "WHERE r.org_id = :org" + _VISIBLE + where
        )
        async with self._db.read() as conn:
            found = (await conn.execute(text(statement), params)).all()
        files: list[IncidentFile] = []
        for channel_id, started_at, path, body, updated_at, size_bytes in found:
            folder = f"{aware(_when(started_at)):%Y-%m-%d}-{channel_id}"
            if dir_name is None or folder == dir_name:
                files.append(
                    IncidentFile(folder, path, body or "", aware(_when(updated_at)), size_bytes)
                )
        return files

    async def glob(
        self,
        viewer: Viewer,
        pattern: str,
        prefix: str = "/",
        *,
        generated: Sequence[str] = (),
    ) -> list[Entry]:
        """Files of the ``/incidents`` tree (``/<folder>/<path>``) matching a glob relative
        to ``prefix``, most recently modified first, as ``FileStore.glob`` matches them.
        ``generated``: names of files made on read in each folder (``timeline.md``), dated
        by their incident's last summary. Raises InvalidPath (a bad ``prefix``)."""
        prefix = normalise_path(prefix)
        folder = _folder_of(prefix)
        found: list[PathRow] = [
            (f"/{f.dir_name}{f.path}", 0, f.size_bytes, f.updated_at, 0o644)
            for f in await self.files(viewer, folder, with_content=False)
        ]
        if generated:
            for incident in await self.incidents(viewer):
                if folder is None or incident.dir_name == folder:
                    found += [
                        (f"/{incident.dir_name}/{name}", 0, 0, incident.started_at, 0o444)
                        for name in generated
                    ]
        under = [row for row in found if _is_under(row[0], prefix)]
        absolute = listing.absolute_pattern(pattern, prefix)
        return await asyncio.to_thread(listing.glob_entries, under, absolute)

    async def grep(
        self,
        viewer: Viewer,
        pattern: str,
        *,
        prefix: str = "/",
        glob: str | None = None,
        ignore_case: bool = False,
        before: int = 0,
        after: int = 0,
        multiline: bool = False,
        newest_first: bool = False,
        timeout_s: float = 20.0,
    ) -> list[FileMatches]:
        """Lines matching a regex in the notes of the ``/incidents`` tree (one
        ``FileMatches`` per file with a match), with the
        semantics of ``FileStore.grep`` (RE2, linear time, off the event loop); paths are
        ``/<folder>/<path>``. Raises InvalidPath; ValueError for a bad regex;
        SearchTimeout."""
        prefix = normalise_path(prefix)
        deadline = time.monotonic() + timeout_s
        literal = None if multiline else required_literal(pattern)
        if ignore_case and literal is not None and not literal.isascii():
            literal = None
        chosen_files = await self.files(
            viewer, _folder_of(prefix), containing=literal, ignore_case=ignore_case
        )
        found = [
            (f"/{f.dir_name}{f.path}", f.content, f.updated_at)
            for f in chosen_files
            if _is_under(f"/{f.dir_name}{f.path}", prefix)
        ]

        def run() -> list[FileMatches]:
            regex = compile_pattern(pattern, ignore_case=ignore_case, multiline=multiline)
            chosen = listing.grep_order(found, glob, prefix, newest_first=newest_first)
            return search(
                chosen, regex, before=before, after=after, multiline=multiline, deadline=deadline
            )

        return await asyncio.to_thread(run)

    async def related(self, viewer: Viewer, query: RecallQuery, *, limit: int = 3) -> list[Related]:
        """The past incidents closest to ``query`` that ``viewer`` may see, best first
        (never the viewer's own channel).

        Two reads: the incidents naming one of ``query.services`` (an index lookup in
        ``incident_services``), then, when they are fewer than ``limit``, up to
        ``CANDIDATES`` more ranked by full text (PostgreSQL: the weighted ``tsvector``;
        SQLite: FTS5's ``bm25``; services weigh most, then title and symptoms, then cause and
        fix). Each candidate then scores ``SERVICE_WEIGHT`` per service it shares with the
        query, plus its share of the query's words (title and symptoms count double). A
        candidate sharing no service must share ``MIN_SHARED_WORDS`` query words, so an
        unrelated alert finds nothing. Ties: newest first, then channel.
        """
        services = tuple(dict.fromkeys(s.lower() for s in query.services if s.strip()))[:16]
        words = list(
            dict.fromkeys((*words_of(" ".join(services)), *words_of(" ".join(query.words))))
        )[:64]
        if not words:
            return []
        params: dict[str, Any] = {**_seen_by(viewer)}
        async with self._db.read() as conn:
            found: Sequence[Sequence[Any]] = ()
            if services:
                by_service = text(_BY_SERVICE).bindparams(bindparam("services", expanding=True))
                bound = {**params, "services": services, "by_service": BY_SERVICE_MAX}
                found = (await conn.execute(by_service, bound)).all()
            scored = _rerank(viewer.org_id, found, services, words)
            if len(scored) < limit:
                known = {r.incident.channel_id for r in scored}
                more = (await conn.execute(*self._by_text(viewer, words))).all()
                fresh = [row for row in more if row[0] not in known]
                scored += _rerank(viewer.org_id, fresh, services, words)
        scored.sort(
            key=lambda r: (-r.score, -r.incident.started_at.timestamp(), r.incident.channel_id)
        )
        return scored[:limit]

    def _by_text(self, viewer: Viewer, words: Sequence[str]) -> tuple[Any, dict[str, Any]]:
        """The full-text candidates' statement and parameters, for this backend."""
        params: dict[str, Any] = {**_seen_by(viewer), "candidates": CANDIDATES}
        if self._db.is_postgres:
            params["q"] = " | ".join(words)
            return text(_PG_RELATED), params
        org = viewer.org_id.replace('"', '""')
        params["m"] = f'org : "{org}" AND (' + " OR ".join(f'"{w}"' for w in words) + ")"
        return text(_SQLITE_RELATED), params


def _folder_of(prefix: str) -> str | None:
    """The incident folder a ``/incidents``-relative prefix is inside (None: the root)."""
    first = prefix.strip("/").split("/", 1)[0]
    return first or None


def _is_under(path: str, prefix: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _when(value: Any) -> datetime:
    """A timestamp column read by ``text()``: SQLite gives ISO text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


_COLUMNS = (
    "r.channel_id, r.started_at, r.title, r.services, r.symptoms, r.root_cause, r.fix, "
    "r.links, r.summary_version, "
    "EXISTS (SELECT 1 FROM private_channels p WHERE p.org_id = r.org_id "
    "AND p.channel_id = r.channel_id)"
)
_VISIBLE = (
    " AND (:org_wide OR r.channel_id = :viewer OR NOT EXISTS (SELECT 1 FROM private_channels p"
    " WHERE p.org_id = r.org_id AND p.channel_id = r.channel_id))"
)
_LIST = f"SELECT {_COLUMNS} FROM incident_recall r WHERE r.org_id = :org" + _VISIBLE
_BY_SERVICE = (
    f"SELECT {_COLUMNS} FROM incident_recall r WHERE r.org_id = :org AND r.channel_id <> :viewer"
    " AND r.channel_id IN (SELECT s.channel_id FROM incident_services s"
    " WHERE s.org_id = :org AND s.service IN :services)"
    + _VISIBLE
    + " ORDER BY r.started_at DESC, r.channel_id LIMIT :by_service"
)
_PG_RELATED = (
    f"SELECT {_COLUMNS}, ts_rank(r.search, q) AS rank "
    "FROM incident_recall r, to_tsquery('english', :q) q "
    "WHERE r.org_id = :org AND r.channel_id <> :viewer AND r.search @@ q"
    + _VISIBLE
    + " ORDER BY rank DESC, r.started_at DESC LIMIT :candidates"
)
_SQLITE_RELATED = (
    f"SELECT {_COLUMNS}, -bm25(incident_recall_fts, 0.0, 4.0, 2.0, 1.0) AS rank "
    "FROM incident_recall_fts JOIN incident_recall r ON r.rowid = incident_recall_fts.rowid "
    "WHERE incident_recall_fts MATCH :m AND r.org_id = :org AND r.channel_id <> :viewer"
    + _VISIBLE
    + " ORDER BY rank DESC, r.started_at DESC LIMIT :candidates"
)


_SQLITE_DROP_ORG = (
    "DELETE FROM incident_recall_fts WHERE rowid IN "
    "(SELECT rowid FROM incident_recall WHERE org_id = :org)"
)
_SQLITE_INDEX_ORG = (
    "INSERT INTO incident_recall_fts (rowid, org, services, title_symptoms, cause_fix) "
    "SELECT rowid, org_id, services, title || char(10) || symptoms, "
    "root_cause || char(10) || fix FROM incident_recall WHERE org_id = :org"
)


def _seen_by(viewer: Viewer) -> dict[str, Any]:
    return {"org": viewer.org_id, "viewer": viewer.channel_id, "org_wide": viewer.private_org_wide}


def _incident(org_id: str, row: Sequence[Any]) -> PastIncident:
    summary = IncidentSummary(
        title=row[2],
        services=tuple(row[3].split()),
        symptoms=row[4],
        root_cause=row[5],
        fix=row[6],
        links=tuple(line for line in row[7].split("\n") if line),
    )
    return PastIncident(org_id, row[0], aware(_when(row[1])), summary, row[8], bool(row[9]))


def _rerank(
    org_id: str, found: Sequence[Sequence[Any]], services: Sequence[str], words: Sequence[str]
) -> list[Related]:
    """Score each candidate row (see ``RecallStore.related``); the unqualified are dropped."""
    wanted = {_stem(w) for w in words}
    scored: list[Related] = []
    for row in found:
        incident = _incident(org_id, row)
        s = incident.summary
        shared_services = len(set(services) & set(s.services))
        near = wanted & {
            _stem(w) for w in words_of(f"{s.title} {s.symptoms} {' '.join(s.services)}")
        }
        far = wanted & {_stem(w) for w in words_of(f"{s.root_cause} {s.fix}")}
        if not shared_services and len(near | far) < MIN_SHARED_WORDS:
            continue
        text_score = (2 * len(near) + len(far - near)) / (2 * len(wanted))
        score = SERVICE_WEIGHT * shared_services + text_score
        scored.append(Related(incident, round(score, 6)))
    return scored


async def _index_sqlite(
    conn: AsyncConnection, org_id: str, channel_id: str, summary: IncidentSummary
) -> None:
    """Replace the FTS5 row of the recall row (same ``rowid``), in the caller's transaction."""
    rowid = await conn.scalar(
        text("SELECT rowid FROM incident_recall WHERE org_id = :org AND channel_id = :channel"),
        {"org": org_id, "channel": channel_id},
    )
    await conn.execute(text("DELETE FROM incident_recall_fts WHERE rowid = :r"), {"r": rowid})
    await conn.execute(
        text(
            "INSERT INTO incident_recall_fts (rowid, org, services, title_symptoms, cause_fix) "
            "VALUES (:r, :org, :services, :title_symptoms, :cause_fix)"
        ),
        {
            "r": rowid,
            "org": org_id,
            "services": " ".join(summary.services),
            "title_symptoms": f"{summary.title}\n{summary.symptoms}",
            "cause_fix": f"{summary.root_cause}\n{summary.fix}",
        },
    )
