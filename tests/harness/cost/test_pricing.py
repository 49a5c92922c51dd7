"""The price table: exact nano-dollar costs, the long-prompt band, unpriced models flagged."""

from __future__ import annotations

from decimal import Decimal

import pytest

from harness import Usage, default_prices, parse_prices

ROW = """
[models.m]
input = "0.10"
output = "0.50"
cache_read = "0.01"
cache_write = "0.125"
source = "https://example.invalid/prices"
read_on = "2026-12-02"
[models.m.long_prompt]
threshold_tokens = 100
input = "0.50"
output = "2.50"
cache_read = "0.05"
cache_write = "0.625"
"""


def test_a_call_is_priced_per_kind_of_token_exactly() -> None:
    usage = Usage(
        input_tokens=3, output_tokens=7, cache_read_input_tokens=11, cache_creation_input_tokens=13
    )
    cost = default_prices().cost("claude-sonnet-5-5", usage)
    # $2, $10, $0.20 and $2.50 per million tokens
    expected = (
        3 * Decimal(2) + 7 * Decimal(10) + 11 * Decimal("0.20") + 13 * Decimal("2.50")
    ) / 10**6
    assert cost.priced
    assert cost.usd == expected


def test_a_prompt_over_the_threshold_pays_the_long_prompt_rates_on_every_token() -> None:
    table = parse_prices(ROW)
    short = table.cost("m", Usage(input_tokens=60, cache_read_input_tokens=40, output_tokens=10))
    long = table.cost("m", Usage(input_tokens=61, cache_read_input_tokens=40, output_tokens=10))
    assert short.nanousd == 60 * 100 + 40 * 10 + 10 * 500
    assert long.nanousd == 61 * 500 + 40 * 50 + 10 * 2500


def test_an_unknown_model_is_counted_but_flagged_unpriced() -> None:
    cost = default_prices().cost("claude-unreleased-9", Usage(input_tokens=1000))
    assert not cost.priced
    assert cost.nanousd == 0


def test_a_row_without_its_source_is_refused() -> None:
    without_source = ROW.replace('source = "https://example.invalid/prices"\n', "")
    with pytest.raises(ValueError, match="price of m"):
        parse_prices(without_source)
