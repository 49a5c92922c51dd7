"""A model that records every answered call in the model-call ledger, priced (§14).

``MeteredModel`` wraps the ``Model`` a step uses: when a call returns, its usage is priced
from the price table and written to the ledger before the reply goes back to the step. So
a call whose step crashes before committing is still counted (the API answered, and
billed, it), and the committed checkpoint's usage is never counted a second time. A call
that fails (an error, a stalled stream) returns no usage and writes nothing: the adapter
reports usage only for the attempt that produced a reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.cost.pricing import PriceTable, default_prices
from harness.model.adapter import Model, ModelReply, TextCallback, ToolSpec
from harness.model.messages import Message, Usage
from memory_store import Clock, ModelCall, ModelCallLog, SessionKey, TokenUsage, utc_now


@dataclass
class MeteredModel:
    """``inner`` whose answered calls are written to ``ledger`` for ``session_id``; each
    written row is then given to ``observe`` (metrics), if set.

    Raises (from ``complete``): what ``inner`` raises, and ``DatabaseUnavailable`` when
    the ledger cannot be written (the step then fails as transient and is retried).
    """

    inner: Model
    ledger: ModelCallLog
    session_id: str
    key: SessionKey
    prices: PriceTable | None = None
    clock: Clock = utc_now
    observe: Callable[[ModelCall], None] | None = None

    async def complete(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        messages: Sequence[Message],
        max_tokens: int | None = None,
        on_text: TextCallback | None = None,
    ) -> ModelReply:
        """``inner.complete``, then one ledger row for the reply."""
        reply = await self.inner.complete(
            system=system, tools=tools, messages=messages, max_tokens=max_tokens, on_text=on_text
        )
        cost = (self.prices or default_prices()).cost(reply.model, reply.usage)
        call = ModelCall(
            session_id=self.session_id,
            key=self.key,
            at=self.clock(),
            model=reply.model,
            usage=token_usage(reply.usage),
            cost_nanousd=cost.nanousd,
            priced=cost.priced,
            request_id=reply.request_id,
        )
        await self.ledger.record(call)
        if self.observe is not None:
            self.observe(call)
        return reply


def token_usage(usage: Usage) -> TokenUsage:
    """The harness's ``Usage`` as the store's ``TokenUsage``."""
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
    )
