"""Model prices: the dated price table (``prices.toml``) and the cost of one call's usage.

Costs are integers of nano-US-dollars (1e-9 USD): every published price has at most three
decimals per million tokens, so a token's price is a whole number of nano-dollars and sums
are exact. ``usd`` turns them back into ``Decimal`` dollars.

>>> table = default_prices()
>>> table.cost("claude-sonnet-5-5", Usage(input_tokens=1_000_000)).usd
Decimal('2')
>>> table.cost("claude-sonnet-5-5", Usage(output_tokens=1000, cache_read_input_tokens=1000)).nanousd
10200000
>>> table.cost("no-such-model", Usage(input_tokens=5)).priced
False
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from importlib import resources
from typing import Any

from harness.model.messages import Usage

NANO_PER_USD = 10**9
_NANO_PER_TOKEN_PER_USD_MTOK = 1000  # $1 per million tokens = 1,000 nano-dollars per token


def usd(nanousd: int) -> Decimal:
    """Nano-dollars as dollars (exact)."""
    return Decimal(nanousd) / NANO_PER_USD


def nanousd(dollars: float | Decimal | str) -> int:
    """Dollars as whole nano-dollars (rounded down): for caps read from settings."""
    return int(Decimal(str(dollars)) * NANO_PER_USD)


@dataclass(frozen=True)
class Rates:
    """USD per million tokens of each kind (``cache_write``: the 5-minute write)."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal

    def nanousd(self, usage: Usage) -> int:
        """The cost of ``usage`` at these rates, in nano-dollars (exact for ≤ 3 decimals)."""
        per_token = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_input_tokens * self.cache_read
            + usage.cache_creation_input_tokens * self.cache_write
        )
        return int(per_token * _NANO_PER_TOKEN_PER_USD_MTOK)


@dataclass(frozen=True)
class Price:
    """One model's row: its rates, an optional long-prompt band, and where they came from.

    ``long_prompt`` is ``(threshold_tokens, rates)``: a call whose prompt (input, cache
    reads and writes) is over the threshold pays those rates on all its tokens.
    """

    model: str
    rates: Rates
    source: str
    read_on: date
    long_prompt: tuple[int, Rates] | None = None
    note: str = ""

    def rates_for(self, usage: Usage) -> Rates:
        """The rates a call with ``usage`` pays."""
        if self.long_prompt is not None and usage.prompt_tokens() > self.long_prompt[0]:
            return self.long_prompt[1]
        return self.rates


@dataclass(frozen=True)
class Cost:
    """The cost of some usage: ``nanousd`` (0 when unpriced) and whether it was priced."""

    nanousd: int
    priced: bool

    @property
    def usd(self) -> Decimal:
        """``nanousd`` in dollars."""
        return usd(self.nanousd)


class PriceTable:
    """Prices by model id (see ``prices.toml`` for the source and date of each row)."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    def get(self, model: str) -> Price | None:
        """The row of ``model``, or None when it is not priced."""
        return self._prices.get(model)

    def cost(self, model: str, usage: Usage) -> Cost:
        """The cost of one call of ``model`` that used ``usage``; unpriced: 0, flagged."""
        price = self._prices.get(model)
        if price is None:
            return Cost(0, priced=False)
        return Cost(price.rates_for(usage).nanousd(usage), priced=True)

    def models(self) -> tuple[str, ...]:
        """The priced model ids, in table order."""
        return tuple(self._prices)


def parse_prices(text: str) -> PriceTable:
    """A ``PriceTable`` from TOML text in ``prices.toml``'s format.

    Raises:
        ValueError: a row lacks a rate, its source or its date, or a rate is not a number.
    """
    data = tomllib.loads(text)
    prices: dict[str, Price] = {}
    for model, row in data.get("models", {}).items():
        try:
            band = row.get("long_prompt")
            long_prompt = (int(band["threshold_tokens"]), _rates(band)) if band else None
            prices[model] = Price(
                model=model,
                rates=_rates(row),
                source=str(row["source"]),
                read_on=date.fromisoformat(str(row["read_on"])),
                long_prompt=long_prompt,
                note=str(row.get("note", "")),
            )
        except (KeyError, ArithmeticError, ValueError) as exc:
            raise ValueError(f"price of {model}: {exc!r}") from exc
    return PriceTable(prices)


def _rates(row: Mapping[str, Any]) -> Rates:
    values = {k: Decimal(str(row[k])) for k in ("input", "output", "cache_read", "cache_write")}
    if any(v < 0 for v in values.values()):
        raise ValueError("negative price")
    return Rates(**values)


@functools.cache
def default_prices() -> PriceTable:
    """The table shipped in the package (``harness/cost/prices.toml``), read once."""
    text = resources.files("harness.cost").joinpath("prices.toml").read_text(encoding="utf-8")
    return parse_prices(text)
