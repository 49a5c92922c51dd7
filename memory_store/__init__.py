"""memory_store: every durable row, in SQL (org files, sessions, Slack outbox).

The door: other packages import only these names.
"""

from .clock import Clock, utc_now
from .db import Database, normalise_url
from .dedupe import InboundDedupe
from .errors import (
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
    SessionNotFound,
    StaleVersion,
    StoreError,
    StringNotFound,
    VersionNotFound,
)
from .files import FileStore
from .migrate import SchemaVersion
from .outbox import Outbox
from .paths import normalise_file_path, normalise_path
from .records import (
    DEFAULT_LIMITS,
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
from .session_records import (
    Cancelled,
    Claim,
    Continue,
    Event,
    EventKind,
    Finish,
    InboxItem,
    NewEvent,
    Opened,
    OutboxItem,
    Outcome,
    Session,
    SessionKey,
    SessionStatus,
    SweepResult,
    TokenUsage,
    Wait,
    Wakeup,
)
from .sessions import SessionStore
from .skills import validate_skill

__all__ = [
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
    "NewEvent",
    "Opened",
    "Outcome",
    "Session",
    "SessionKey",
    "SessionStatus",
    "SessionStore",
    "SweepResult",
    "TokenUsage",
    "Wait",
    "Wakeup",
    "utc_now",
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
    "SessionNotFound",
    "StaleVersion",
    "StoreError",
    "StringNotFound",
    "VersionNotFound",
]
