"""Memory that compounds (issue 29): past incidents as a read-only tree (``/incidents``),
related incidents in the first message, and each incident's structured summary."""
