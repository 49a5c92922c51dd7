"""sandbox_client: the SBX/1 client, sandbox providers and the local sandbox server.

The door: other packages import only these names.
"""

from .blaxel import BlaxelConfig, BlaxelProvider
from .client import SandboxClient
from .errors import (
    FileNotFound,
    InvalidPath,
    IsADirectory,
    NameInUse,
    NotADirectory,
    PathError,
    ProcessNotFound,
    ProtocolError,
    ProvisionFailed,
    RequestRejected,
    SandboxError,
    SandboxGone,
    SandboxTimeout,
    SandboxUnavailable,
)
from .lifecycle import EnsureResult, SandboxManager
from .local import LocalConfig, LocalProvider
from .provider import SandboxProvider
from .records import DirEntry, Health, OutputChunk, ProcessRecord, ProcessStatus, SandboxHandle
from .setup import Loss, SetupStep, StepFailure, StepKind
from .transport import ClientOptions

__all__ = [
    # client
    "ClientOptions",
    "DirEntry",
    "OutputChunk",
    "ProcessRecord",
    "ProcessStatus",
    "SandboxClient",
    # providers
    "BlaxelConfig",
    "BlaxelProvider",
    "Health",
    "LocalConfig",
    "LocalProvider",
    "SandboxHandle",
    "SandboxProvider",
    # lifecycle
    "EnsureResult",
    "Loss",
    "SandboxManager",
    "SetupStep",
    "StepFailure",
    "StepKind",
    # errors
    "FileNotFound",
    "InvalidPath",
    "IsADirectory",
    "NameInUse",
    "NotADirectory",
    "PathError",
    "ProcessNotFound",
    "ProtocolError",
    "ProvisionFailed",
    "RequestRejected",
    "SandboxError",
    "SandboxGone",
    "SandboxTimeout",
    "SandboxUnavailable",
]
