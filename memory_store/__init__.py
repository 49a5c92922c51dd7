"""memory_store: every durable row, in SQL (org files, sessions, Slack outbox).

The door: other packages import only these names.
"""

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
from memory_store.incident import IncidentLog, IncidentRow, IncidentRows, IncidentSession
from memory_store.migrate import SchemaVersion
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
    FileVersion,
    GrepMatch,
    IndexEntry,
    Limits,
    Namespace,
    Origin,
    Revision,
    Scope,
    WriteResult,
)
from memory_store.sandboxes.ledger import SandboxLedgerStore
from memory_store.sessions.dedupe import InboundDedupe
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
from memory_store.tasks.store import BackgroundTask, BackgroundTasks

__all__ = [
    # the egress audit log
    "EgressEntry",
    "EgressLog",
    "EgressTokens",
    "TokenOwner",
    # the incident record's rows
    "IncidentLog",
    # past incidents' recall (issue 29)
    "Given",
    "IncidentFile",
    "IncidentSummary",
    "PastIncident",
    "RecallQuery",
    "RecallStore",
    "Related",
    "Viewer",
    "words_of",
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
    "normalise_url",
    # files
    "Change",
    "DEFAULT_LIMITS",
    "EditResult",
    "Entry",
    "FileKey",
    "FileStore",
    "FileVersion",
    "GrepMatch",
    "IndexEntry",
    "Limits",
    "Namespace",
    "Origin",
    "Revision",
    "Scope",
    "READ_ONLY_TREES",
    "WriteResult",
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
    "Opened",
    "Outcome",
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
]
