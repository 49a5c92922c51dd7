"""Settings of long work (#17) that cannot mean what they say are refused at start-up."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.settings import Settings


def test_a_shortest_wake_up_above_the_longest_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # The longest ScheduleWakeup delay is an hour: a shortest one above it cannot hold
    monkeypatch.setenv("WARROOM_MIN_WAKEUP_S", "7200")

    with pytest.raises(ValidationError, match="WARROOM_MIN_WAKEUP_S"):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_a_shortest_wake_up_of_an_hour_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARROOM_MIN_WAKEUP_S", "3600")

    assert Settings(_env_file=None).min_wakeup_s == 3600  # type: ignore[call-arg]
