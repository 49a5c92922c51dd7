"""Durable sessions: the row, its event log, claims and leases, inbox, outbox, sweeper, dedupe."""
