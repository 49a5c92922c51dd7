"""Workspace chores of the lifecycle manager: list what is there, replay the set-up."""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_client.client import SandboxClient
from sandbox_client.errors import PathError, RequestRejected
from sandbox_client.setup import SetupStep, StepFailure, StepKind

MAX_LISTED_DIRS = 500


async def list_files(client: SandboxClient, root: str, max_files: int) -> tuple[str, ...]:
    """Paths of the files under ``root``, breadth first, at most ``max_files`` (and
    ``MAX_LISTED_DIRS`` directories visited). Unreadable directories are skipped."""
    files: list[str] = []
    queue = [root]
    for directory in queue:
        if len(queue) > MAX_LISTED_DIRS or len(files) >= max_files:
            break
        try:
            entries = await client.list_dir(directory)
        except PathError:
            continue
        for entry in entries:
            (queue if entry.is_dir else files).append(entry.path)
    return tuple(sorted(files[:max_files]))


async def replay(
    client: SandboxClient, steps: Sequence[SetupStep], *, prefix: str
) -> tuple[StepFailure, ...]:
    """Run ``steps`` in order on a new sandbox; every step is tried even after a failure.

    Commands run as processes named ``{prefix}-{index}``.

    Raises:
        SandboxUnavailable: the sandbox stopped answering.
    """
    failures = []
    for index, step in enumerate(steps):
        reason = await _replay_one(client, step, f"{prefix}-{index}")
        if reason:
            failures.append(StepFailure(step, reason))
    return tuple(failures)


async def _replay_one(client: SandboxClient, step: SetupStep, name: str) -> str:
    """ "" when the step replayed, else why not (for the model)."""
    try:
        if step.kind is StepKind.FILE:
            await client.write_file(step.path, step.data)
            return ""
        record = await client.exec(
            name, step.command, timeout_s=step.timeout_s, working_dir=step.working_dir
        )
    except PathError as exc:
        return exc.reason
    except RequestRejected as exc:
        return exc.message
    if record.timed_out:
        return f"timed out after {step.timeout_s:g} s"
    if record.exit_code != 0:
        tail = record.stderr.strip()[-300:] or record.stdout.strip()[-300:]
        return f"exit code {record.exit_code}" + (f": {tail}" if tail else "")
    return ""
