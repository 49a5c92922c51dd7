"""The ``background_tasks`` table (made by migration 0011): one row per background process.

A row is written when a session starts a command in the background (Bash with
``run_in_background``) and names the sandbox it runs in. ``state`` is ``running``
until a watcher sees the process end (``completed``, ``failed``), the model or ``stop``
ends it (``killed``), or its sandbox is gone (``lost``). ``check_at`` is when a watcher
looks at it next: claiming a row moves it on, so several workers share the polling
without looking at one process twice. A monitor (``kind`` ``monitor``) also has a
``deadline_at`` (None: it runs until stopped) and ``delivered_bytes``, how much of its
output file was already delivered (``delivered_at``: when; ``delivered_tail``: its last
bytes, at most ``TAIL_KEPT``, ending at ``delivered_tail_at``; ``output_head``: the file's
first bytes, as many; ``output_generation``: how often the file was found cut and
followed from its start again; migration 0022). ``read_failures``: looks in a row whose
read of the output failed. While a row of a sandbox is
``running`` no worker suspends or destroys that sandbox (``SandboxLedgerStore``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime

background_tasks = Table(
    "background_tasks",
    metadata,
    Column("session_id", String(64), nullable=False),
    Column("task_id", String(32), nullable=False),
    Column("tool_use_id", String(128), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("sandbox_id", String(128), nullable=False),
    Column("handle", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("output_path", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("exit_code", Integer, nullable=True),
    Column("started_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime, nullable=True),
    Column("check_at", UtcDateTime, nullable=False),
    Column("deadline_at", UtcDateTime, nullable=True),
    Column("delivered_bytes", BigInteger, nullable=False, server_default="0"),
    Column("delivered_at", UtcDateTime, nullable=True),
    Column("output_generation", Integer, nullable=False, server_default="0"),
    Column("delivered_tail", LargeBinary, nullable=True),
    Column("delivered_tail_at", BigInteger, nullable=True),
    Column("output_head", LargeBinary, nullable=True),
    Column("read_failures", Integer, nullable=False, server_default="0"),
    PrimaryKeyConstraint("session_id", "task_id", name="pk_background_tasks"),
    Index("ix_background_tasks_state_check_at", "state", "check_at"),
    Index("ix_background_tasks_sandbox_id", "sandbox_id"),
)
