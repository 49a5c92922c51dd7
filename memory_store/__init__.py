"""memory_store: every durable row, in SQL (org files, sessions, Slack outbox).

The door: other packages import only these names. Each is imported on first use
(PEP 562 ``__getattr__``), so a process that needs one light module does not pay for
SQLAlchemy and Alembic: ``warroom doctor --quick`` reads the schema's revision through
``memory_store.schema_probe`` alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_store.alerts.store import (
        AlertDecision,
        AlertStore,
        AlertTally,
        AlertThread,
        NewAlert,
        PendingAlert,
    )
    from memory_store.clock import Clock, utc_now
    from memory_store.cron.store import CronJob, CronJobs
    from memory_store.db import Database, normalise_url
    from memory_store.egress import EgressEntry, EgressLog, EgressTokens, TokenOwner
    from memory_store.errors import (
        AmbiguousMatch,
        CaseConflict,
        DatabaseUnavailable,
        EditFailed,
        Fenced,
        FileExists,
        FileNotFound,
        FileTooLarge,
        InvalidContent,
        InvalidPath,
        InvalidSkill,
        NoChange,
        PostNotFound,
        QuotaExceeded,
        SearchTimeout,
        SessionNotFound,
        StaleVersion,
        StoreError,
        StringNotFound,
        VersionNotFound,
    )
    from memory_store.files.paths import normalise_file_path, normalise_path
    from memory_store.files.skills import validate_skill
    from memory_store.files.store import FileStore
    from memory_store.hosts.store import (
        HostStore,
        HostWakeup,
    )
    from memory_store.incident import IncidentLog, IncidentRow, IncidentRows, IncidentSession
    from memory_store.model_calls import ModelCall, ModelCallLog, Spend
    from memory_store.recall.store import (
        Given,
        IncidentFile,
        IncidentSummary,
        PastIncident,
        RecallQuery,
        RecallStore,
        Related,
        Viewer,
        words_of,
    )
    from memory_store.records import (
        DEFAULT_LIMITS,
        READ_ONLY_TREES,
        Change,
        EditResult,
        Entry,
        FileKey,
        FileMatches,
        FileVersion,
        GrepMatch,
        IndexEntry,
        Limits,
        Namespace,
        Origin,
        Revision,
        Scope,
        WriteResult,
        grep_lines,
    )
    from memory_store.sandboxes.ledger import SandboxLedgerStore
    from memory_store.schema_probe import Probed, SchemaVersion, probe_schema
    from memory_store.sessions.dedupe import InboundDedupe
    from memory_store.sessions.liveness import LIVE_MARK, OwnerLiveness, process_host
    from memory_store.sessions.outbox import Outbox
    from memory_store.sessions.records import (
        Cancelled,
        Claim,
        Continue,
        Event,
        EventKind,
        Finish,
        InboxItem,
        IoCounters,
        NewEvent,
        Opened,
        OutboxItem,
        Outcome,
        Session,
        SessionKey,
        SessionOrigin,
        SessionStatus,
        SweepResult,
        TokenUsage,
        TranscriptDelta,
        TranscriptMark,
        Wait,
        Wakeup,
    )
    from memory_store.sessions.store import SessionStore
    from memory_store.tasks.store import TAIL_KEPT, BackgroundTask, BackgroundTasks
    from memory_store.watch.store import (
        ChannelWatch,
        WatchedChannels,
    )

__all__ = [
    # past incidents' recall (issue #29)
    "Given",
    "IncidentFile",
    "IncidentSummary",
    "PastIncident",
    "RecallQuery",
    "RecallStore",
    "Related",
    "Viewer",
    "words_of",
    "READ_ONLY_TREES",
    # alerts (issue #27), worker hosts (issue #30), watched channels
    "AlertDecision",
    "AlertStore",
    "AlertTally",
    "AlertThread",
    "NewAlert",
    "PendingAlert",
    "HostStore",
    "HostWakeup",
    "ChannelWatch",
    "WatchedChannels",
    # the egress audit log
    "EgressEntry",
    "EgressLog",
    "EgressTokens",
    "TokenOwner",
    # the incident record's rows
    "IncidentLog",
    # past incidents' recall (issue 29)
    "IncidentRow",
    "IncidentRows",
    "IncidentSession",
    # the model-call ledger (cost)
    "ModelCall",
    "ModelCallLog",
    "Spend",
    # database
    "Database",
    "SchemaVersion",
    "Probed",
    "probe_schema",
    "normalise_url",
    # files
    "Change",
    "DEFAULT_LIMITS",
    "EditResult",
    "Entry",
    "FileKey",
    "FileMatches",
    "FileStore",
    "FileVersion",
    "GrepMatch",
    "IndexEntry",
    "Limits",
    "Namespace",
    "Origin",
    "Revision",
    "Scope",
    "WriteResult",
    "grep_lines",
    # paths and skills
    "normalise_file_path",
    "normalise_path",
    "validate_skill",
    # sessions (claim/commit protocol, inbox, sweeper)
    "Cancelled",
    "Claim",
    "Clock",
    "Continue",
    "Event",
    "EventKind",
    "Finish",
    "InboxItem",
    "IoCounters",
    "NewEvent",
    "LIVE_MARK",
    "Opened",
    "Outcome",
    "OwnerLiveness",
    "Session",
    "SessionKey",
    "SessionOrigin",
    "SessionStatus",
    "SessionStore",
    "SweepResult",
    "TokenUsage",
    "TranscriptDelta",
    "TranscriptMark",
    "Wait",
    "Wakeup",
    "utc_now",
    # sandboxes (the shared use record)
    "SandboxLedgerStore",
    # background processes of sessions
    "BackgroundTask",
    "BackgroundTasks",
    "TAIL_KEPT",
    "CronJob",
    "CronJobs",
    # Slack outbox and inbound dedupe
    "InboundDedupe",
    "Outbox",
    "OutboxItem",
    # errors
    "AmbiguousMatch",
    "CaseConflict",
    "DatabaseUnavailable",
    "EditFailed",
    "FileExists",
    "Fenced",
    "FileNotFound",
    "FileTooLarge",
    "InvalidContent",
    "InvalidPath",
    "InvalidSkill",
    "NoChange",
    "PostNotFound",
    "QuotaExceeded",
    "SearchTimeout",
    "SessionNotFound",
    "StaleVersion",
    "StoreError",
    "StringNotFound",
    "VersionNotFound",
    "process_host",
]

_MODULES: dict[str, tuple[str, ...]] = {
    "memory_store.recall.store": (
        "Given",
        "IncidentFile",
        "IncidentSummary",
        "PastIncident",
        "RecallQuery",
        "RecallStore",
        "Related",
        "Viewer",
        "words_of",
    ),
    "memory_store.alerts.store": (
        "AlertDecision",
        "AlertStore",
        "AlertTally",
        "AlertThread",
        "NewAlert",
        "PendingAlert",
    ),
    "memory_store.hosts.store": (
        "HostStore",
        "HostWakeup",
    ),
    "memory_store.watch.store": (
        "ChannelWatch",
        "WatchedChannels",
    ),
    "memory_store.clock": (
        "Clock",
        "utc_now",
    ),
    "memory_store.cron.store": (
        "CronJob",
        "CronJobs",
    ),
    "memory_store.db": (
        "Database",
        "normalise_url",
    ),
    "memory_store.egress": (
        "EgressEntry",
        "EgressLog",
        "EgressTokens",
        "TokenOwner",
    ),
    "memory_store.errors": (
        "AmbiguousMatch",
        "CaseConflict",
        "DatabaseUnavailable",
        "EditFailed",
        "Fenced",
        "FileExists",
        "FileNotFound",
        "FileTooLarge",
        "InvalidContent",
        "InvalidPath",
        "InvalidSkill",
        "NoChange",
        "PostNotFound",
        "QuotaExceeded",
        "SearchTimeout",
        "SessionNotFound",
        "StaleVersion",
        "StoreError",
        "StringNotFound",
        "VersionNotFound",
    ),
    "memory_store.files.paths": (
        "normalise_file_path",
        "normalise_path",
    ),
    "memory_store.files.skills": ("validate_skill",),
    "memory_store.files.store": ("FileStore",),
    "memory_store.incident": (
        "IncidentLog",
        "IncidentRow",
        "IncidentRows",
        "IncidentSession",
    ),
    "memory_store.schema_probe": ("Probed", "SchemaVersion", "probe_schema"),
    "memory_store.model_calls": (
        "ModelCall",
        "ModelCallLog",
        "Spend",
    ),
    "memory_store.records": (
        "READ_ONLY_TREES",
        "Change",
        "DEFAULT_LIMITS",
        "EditResult",
        "Entry",
        "FileKey",
        "FileVersion",
        "GrepMatch",
        "FileMatches",
        "grep_lines",
        "IndexEntry",
        "Limits",
        "Namespace",
        "Origin",
        "Revision",
        "Scope",
        "WriteResult",
    ),
    "memory_store.sandboxes.ledger": ("SandboxLedgerStore",),
    "memory_store.sessions.dedupe": ("InboundDedupe",),
    "memory_store.sessions.liveness": ("LIVE_MARK", "OwnerLiveness", "process_host"),
    "memory_store.sessions.outbox": ("Outbox",),
    "memory_store.sessions.records": (
        "Cancelled",
        "Claim",
        "Continue",
        "Event",
        "EventKind",
        "Finish",
        "InboxItem",
        "IoCounters",
        "NewEvent",
        "Opened",
        "OutboxItem",
        "Outcome",
        "Session",
        "SessionKey",
        "SessionOrigin",
        "SessionStatus",
        "SweepResult",
        "TokenUsage",
        "TranscriptDelta",
        "TranscriptMark",
        "Wait",
        "Wakeup",
    ),
    "memory_store.sessions.store": ("SessionStore",),
    "memory_store.tasks.store": (
        "BackgroundTask",
        "BackgroundTasks",
        "TAIL_KEPT",
    ),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of the door, imported from its module on first use (then kept here)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
