"""The harness's lazy door: its three lists agree, and every name loads from its module."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import harness


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """name -> (module, name there), as the door's ``if TYPE_CHECKING:`` block imports."""
    source = Path(harness.__file__).read_text(encoding="utf-8")
    block = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        assert node.module is not None
        for alias in node.names:
            found[alias.asname or alias.name] = (node.module, alias.name)
    return found


def test_the_type_checking_imports_all_and_the_module_map_name_the_same_things() -> None:
    imported = _type_checking_imports()
    assert sorted(imported) == sorted(harness.__all__)
    assert len(set(harness.__all__)) == len(harness.__all__)
    assert imported == harness._WHERE


def test_every_name_of_the_door_is_its_modules_own() -> None:
    for name, (module, attribute) in harness._WHERE.items():
        assert getattr(harness, name) is getattr(importlib.import_module(module), attribute)


def test_the_model_catalog_loads_without_the_agent() -> None:
    # a fresh interpreter: what importing one light name costs
    probe = "import json, sys; from harness import MODELS; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stdout))
    assert "harness.model.catalog" in loaded
    assert not loaded & {"anthropic", "mcp", "harness.loop.step", "memory_store.db"}
