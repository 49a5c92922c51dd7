"""The local sandbox provider: bubblewrap jails, each running the SBX/1 server."""

from sandbox_client.providers.local.config import JailEgress, LocalConfig
from sandbox_client.providers.local.jail import egress_socket
from sandbox_client.providers.local.limits import NO_LIMITS, JailLimits
from sandbox_client.providers.local.provider import LocalProvider

__all__ = ["NO_LIMITS", "JailEgress", "JailLimits", "LocalConfig", "LocalProvider", "egress_socket"]
