"""The test set-up itself: parallel workers keep to their own Redis database."""

from __future__ import annotations

import doctest

import pytest

from tests import conftest


def test_the_conftest_examples_hold() -> None:
    result = doctest.testmod(conftest)
    assert result.attempted >= 2
    assert result.failed == 0


def test_an_xdist_worker_past_database_0_is_refused() -> None:
    with pytest.raises(ValueError, match="too few Redis databases"):
        conftest._redis_url_of_this_worker("redis://127.0.0.1:6379/1", "gw2")
