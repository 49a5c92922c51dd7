"""memory_store: every durable row, in SQL (org files and their history; sessions later).

The door: other packages import only these names.
"""

from .errors import (
    AmbiguousMatch,
    CaseConflict,
    DatabaseUnavailable,
    EditFailed,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    InvalidSkill,
    NoChange,
    QuotaExceeded,
    StaleVersion,
    StoreError,
    StringNotFound,
)
from .files import FileStore
from .records import (
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

__all__ = [
    # files
    "Change",
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
    # errors
    "AmbiguousMatch",
    "CaseConflict",
    "DatabaseUnavailable",
    "EditFailed",
    "FileNotFound",
    "FileTooLarge",
    "InvalidPath",
    "InvalidSkill",
    "NoChange",
    "QuotaExceeded",
    "StaleVersion",
    "StoreError",
    "StringNotFound",
]
