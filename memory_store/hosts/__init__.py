"""Worker hosts: each host's identity, queue, sandbox scope and heartbeat (issue #30)."""
