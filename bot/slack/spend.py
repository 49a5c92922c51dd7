"""What the model cost, as people read it: tokens and dollars on one line (§14).

>>> from memory_store import Spend, TokenUsage
>>> spend_text(Spend(3, TokenUsage(1200, 300, 40000, 2000), 18_450_000))
'43,500 tokens · $0.018'
>>> spend_text(Spend(1, TokenUsage(10, 5), 0, unpriced_calls=1))
'15 tokens · $0.00 (1 call of an unpriced model not in it)'
>>> format_usd(Decimal("12.3456"))
'$12.35'
"""

from __future__ import annotations

from decimal import Decimal

from harness import Checkpoint, PriceTable, default_prices, token_usage, usd
from memory_store import Spend, TokenUsage


def format_usd(amount: Decimal) -> str:
    """Dollars with cents; under ten cents, with a tenth of a cent (status lines move slowly)."""
    if Decimal(0) < amount < Decimal("0.10"):
        return f"${amount:.3f}"
    return f"${amount:.2f}"


def tokens(usage: TokenUsage) -> int:
    """All four kinds of tokens summed."""
    return (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
    )


def spend_text(spend: Spend) -> str:
    """``'43,500 tokens · $0.018'``, saying when unpriced calls are not in the dollars."""
    text = f"{tokens(spend.usage):,} tokens · {format_usd(usd(spend.cost_nanousd))}"
    if spend.unpriced_calls:
        calls = "call" if spend.unpriced_calls == 1 else "calls"
        text += f" ({spend.unpriced_calls} {calls} of an unpriced model not in it)"
    return text


def checkpoint_spend(cp: Checkpoint, model: str, prices: PriceTable | None = None) -> str:
    """The session's committed usage priced at ``model``'s price (the status line's view:
    no database read; the ledger's total also counts calls lost to crashes)."""
    cost = (prices or default_prices()).cost(model, cp.usage)
    spend = Spend(cp.steps, token_usage(cp.usage), cost.nanousd, 0 if cost.priced else 1)
    return spend_text(spend)
