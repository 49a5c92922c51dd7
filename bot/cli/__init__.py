"""The ``warroom`` command line: each command imports what it needs when it runs.

``app`` holds the typer commands; the other modules are the commands' bodies.
"""
