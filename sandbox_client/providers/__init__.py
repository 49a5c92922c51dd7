"""Sandbox providers: the ``SandboxProvider`` protocol (``base``), local jails, Blaxel."""
