"""The Slack edge: listeners that record and ack, routing, posting, rendering and progress.

It never reaches into the durable driver (an import-linter contract); it records inputs and
enqueues through callables that ``bot`` wires at start-up.
"""
