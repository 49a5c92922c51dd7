"""The durable driver: Dramatiq actors that advance a session one checkpointed step at a time.

``driver`` claims, runs one harness step (or one Slack post) and commits; ``actors`` declares the
broker and the ``advance`` actor; ``wiring`` builds a worker's collaborators from ``Settings``;
``worker_main`` is the module the ``dramatiq`` CLI loads. See docs/architecture.md §5.
"""
