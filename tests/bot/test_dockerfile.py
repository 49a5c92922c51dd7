"""The Dockerfile, read as Docker reads it: non-root, a health check, exec-form commands that
let the Dramatiq parent receive SIGTERM alone. (Docker itself cannot run in CI.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs: comments dropped, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    ))  # fmt: skip
    pairs = []
    for line in joined.splitlines():
        if line.strip():
            name, _, args = line.strip().partition(" ")
            pairs.append((name.upper(), " ".join(args.split())))
    return pairs


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text())


def only(dockerfile: list[tuple[str, str]], name: str) -> str:
    found = [args for instruction, args in dockerfile if instruction == name]
    assert len(found) == 1, f"expected one {name}, found {found}"
    return found[0]


def exec_form(args: str) -> list[str]:
    """The JSON array of an exec-form instruction (a shell-form string fails here)."""
    value = json.loads(args)
    assert isinstance(value, list)
    assert all(isinstance(part, str) for part in value)
    return value


def test_the_image_starts_from_python_3_11_slim_bookworm(
    dockerfile: list[tuple[str, str]],
) -> None:
    # The base is a build argument (CI builds on a stand-in); users get the official image.
    assert dockerfile[0] == ("ARG", "BASE=python:3.11-slim-bookworm")
    assert dockerfile[1] == ("FROM", "${BASE}")


def test_the_service_runs_as_a_non_root_user(dockerfile: list[tuple[str, str]]) -> None:
    users = [args for name, args in dockerfile if name == "USER"]

    assert users
    assert users[-1].split(":")[0] not in ("root", "0")
    last_user = max(i for i, (name, _) in enumerate(dockerfile) if name == "USER")
    later = [name for name, _ in dockerfile[last_user:]]
    assert "RUN" not in later  # nothing runs as root after the switch


def test_entrypoint_and_cmd_are_exec_form_with_tini_signalling_only_its_child(
    dockerfile: list[tuple[str, str]],
) -> None:
    entrypoint = exec_form(only(dockerfile, "ENTRYPOINT"))
    cmd = exec_form(only(dockerfile, "CMD"))

    assert entrypoint == ["tini", "--"]  # no -g: SIGTERM goes to the child, not its group
    assert cmd == ["warroom", "serve"]


def test_the_health_check_runs_the_quick_doctor_in_exec_form(
    dockerfile: list[tuple[str, str]],
) -> None:
    healthcheck = only(dockerfile, "HEALTHCHECK")
    options, _, command = healthcheck.partition(" CMD ")

    assert exec_form(command) == ["warroom", "doctor", "--quick"]
    assert "--timeout=" in options


def test_sandboxes_tools_and_locked_dependencies_are_installed(
    dockerfile: list[tuple[str, str]],
) -> None:
    runs = " ".join(args for name, args in dockerfile if name == "RUN")

    assert re.search(r"apt-get install [^&]*\bbubblewrap\b", runs)
    assert re.search(r"apt-get install [^&]*\bripgrep\b", runs)
    assert re.search(r"apt-get install [^&]*\btini\b", runs)
    assert "pip install -c requirements.lock ." in runs


def test_every_copied_path_exists_in_the_repository(dockerfile: list[tuple[str, str]]) -> None:
    for name, args in dockerfile:
        if name == "COPY":
            *sources, _destination = args.split()
            for source in sources:
                assert (ROOT / source).exists(), source
