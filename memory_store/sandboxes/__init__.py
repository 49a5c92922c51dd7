"""Sandboxes' shared use record (the ``SandboxLedger`` of ``sandbox_client``, in SQL)."""
