"""sandbox_client: the SBX/1 client, sandbox providers and the local sandbox server.

The door: other packages import only these names.
"""

from sandbox_client.client import SandboxClient
from sandbox_client.errors import (
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
    SandboxCannotStart,
    SandboxError,
    SandboxGone,
    SandboxTimeout,
    SandboxUnavailable,
    provision_error,
)
from sandbox_client.ledger import MemoryLedger, SandboxLedger
from sandbox_client.lifecycle import EnsureResult, SandboxManager
from sandbox_client.providers.base import SandboxProvider
from sandbox_client.providers.blaxel import BlaxelConfig, BlaxelProvider
from sandbox_client.providers.local import (
    NO_LIMITS,
    JailEgress,
    JailLimits,
    LocalConfig,
    LocalProvider,
    egress_socket,
)
from sandbox_client.reaper import Reaper
from sandbox_client.records import (
    DirEntry,
    Health,
    OutputChunk,
    ProcessRecord,
    ProcessStatus,
    SandboxHandle,
    SandboxUsage,
)
from sandbox_client.server.isolation import landlock_abi
from sandbox_client.setup import Loss, SetupStep, StepFailure, StepKind
from sandbox_client.transport import ClientOptions

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
    "JailEgress",
    "JailLimits",
    "LocalConfig",
    "egress_socket",
    "landlock_abi",
    "LocalProvider",
    "NO_LIMITS",
    "SandboxHandle",
    "SandboxProvider",
    "SandboxUsage",
    # lifecycle
    "EnsureResult",
    "Loss",
    "MemoryLedger",
    "Reaper",
    "SandboxLedger",
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
    "SandboxCannotStart",
    "SandboxError",
    "SandboxGone",
    "SandboxTimeout",
    "SandboxUnavailable",
    "provision_error",
]
