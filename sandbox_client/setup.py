"""A session's recorded workspace set-up, and what a replaced sandbox lost.

The harness records set-up steps as it goes (files it placed, commands that prepared
the workspace) and stores them with the session (``to_json``/``from_json``). When a
sandbox is gone, the lifecycle manager replays them on the new one and describes the
rest as a ``Loss`` the model is told about.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class StepKind(StrEnum):
    """What a set-up step does."""

    FILE = "file"  # place ``data`` at ``path``
    COMMAND = "command"  # run ``command`` in ``working_dir``


@dataclass(frozen=True)
class SetupStep:
    """One replayable step. Build with ``SetupStep.file`` or ``SetupStep.run``.

    Attributes:
        kind: file or command.
        path: FILE: absolute path in the sandbox (under ``/workspace``).
        data: FILE: the bytes to write.
        command: COMMAND: the shell command.
        timeout_s: COMMAND: the longest the command may take on replay.
        working_dir: COMMAND: where it runs.
    """

    kind: StepKind
    path: str = ""
    data: bytes = b""
    command: str = ""
    timeout_s: float = 120.0
    working_dir: str = "/workspace"

    @classmethod
    def file(cls, path: str, data: bytes) -> SetupStep:
        """A step that writes ``data`` to ``path``."""
        return cls(StepKind.FILE, path=path, data=data)

    @classmethod
    def run(
        cls, command: str, *, timeout_s: float = 120.0, working_dir: str = "/workspace"
    ) -> SetupStep:
        """A step that runs ``command``."""
        return cls(StepKind.COMMAND, command=command, timeout_s=timeout_s, working_dir=working_dir)

    @property
    def summary(self) -> str:
        """A short description: ``write /workspace/x`` or ``run `make```."""
        if self.kind is StepKind.FILE:
            return f"write {self.path}"
        command = self.command if len(self.command) <= 80 else self.command[:77] + "..."
        return f"run `{command}`"

    def to_json(self) -> str:
        """One JSON object; ``data`` is base64."""
        fields: dict[str, Any] = {"kind": self.kind.value}
        if self.kind is StepKind.FILE:
            fields |= {"path": self.path, "data": base64.b64encode(self.data).decode()}
        else:
            fields |= {
                "command": self.command,
                "timeout_s": self.timeout_s,
                "working_dir": self.working_dir,
            }
        return json.dumps(fields, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SetupStep:
        """Load a step written by ``to_json``.

        Raises:
            ValueError: not a step (unknown kind, missing field, bad base64).
        """
        raw: Any = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("a set-up step must be a JSON object")
        try:
            kind = StepKind(raw["kind"])
            if kind is StepKind.FILE:
                return cls.file(str(raw["path"]), base64.b64decode(raw["data"], validate=True))
            return cls.run(
                str(raw["command"]),
                timeout_s=float(raw.get("timeout_s", 120.0)),
                working_dir=str(raw.get("working_dir", "/workspace")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid set-up step: {exc}") from exc


@dataclass(frozen=True)
class StepFailure:
    """A set-up step that did not replay; ``reason`` is written for the model."""

    step: SetupStep
    reason: str


@dataclass(frozen=True)
class Loss:
    """What the session lost when its sandbox was replaced (or could not be set up).

    Attributes:
        old_sandbox_id: the sandbox that is gone ("" when there was none).
        new_sandbox_id: the one that replaces it.
        running_processes: names (tool_use ids) of processes that were running in the
            old sandbox when it was last seen; they did not finish and will not.
        files_not_recreated: workspace files the old sandbox had (when last seen) that
            the replay did not re-create.
        workspace_known: False when the old workspace was never listed, so which files
            were lost is unknown (everything not re-created by the set-up was).
        failed_steps: set-up steps that did not replay.
        replayed_steps: how many steps were replayed (failed ones included).
    """

    old_sandbox_id: str
    new_sandbox_id: str
    running_processes: tuple[str, ...] = ()
    files_not_recreated: tuple[str, ...] = ()
    workspace_known: bool = False
    failed_steps: tuple[StepFailure, ...] = field(default=())
    replayed_steps: int = 0

    def describe(self, max_items: int = 20, *, name: Callable[[str], str] | None = None) -> str:
        """A few lines telling what happened and what is missing: to the model, with the
        processes' names (``tool_use`` ids, which its transcript holds); to people, with
        ``name`` of each (what it ran: an id means nothing in a thread), each said once.

        >>> loss = Loss("sbx-1", "sbx-2", running_processes=("toolu_1", "toolu_1.so-far"))
        >>> loss.describe(name=lambda process: "`sleep 600`").splitlines()[1]
        'Processes that were still running are gone: `sleep 600`.'
        """
        lines = [
            f"The sandbox was replaced by a new one ({self.new_sandbox_id}); "
            f"the session's set-up was replayed ({self.replayed_steps} steps)."
            if self.old_sandbox_id
            else f"A new sandbox ({self.new_sandbox_id}) was set up "
            f"({self.replayed_steps} steps replayed)."
        ]
        if self.running_processes:
            named = dict.fromkeys(name(p) if name else p for p in self.running_processes)
            names = ", ".join(list(named)[:max_items])
            lines.append(f"Processes that were still running are gone: {names}.")
        if self.files_not_recreated:
            paths = ", ".join(self.files_not_recreated[:max_items])
            more = len(self.files_not_recreated) - max_items
            suffix = f" and {more} more" if more > 0 else ""
            lines.append(f"Files that were not re-created: {paths}{suffix}.")
        elif self.old_sandbox_id and not self.workspace_known:
            lines.append("Files in /workspace not written by the set-up are lost.")
        for failure in self.failed_steps[:max_items]:
            lines.append(f"Set-up step failed: {failure.step.summary}: {failure.reason}")
        return "\n".join(lines)
