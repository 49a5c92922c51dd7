"""The local sandbox provider: bubblewrap jails, each running the SBX/1 server."""

from .config import LocalConfig
from .provider import LocalProvider

__all__ = ["LocalConfig", "LocalProvider"]
