"""The doctest examples in memory_store's pure modules hold."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from memory_store import db, records
from memory_store.files import frontmatter, globs, grep, listing, paths, skills


@pytest.mark.parametrize("module", [paths, globs, grep, frontmatter, skills, listing, db, records])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0
