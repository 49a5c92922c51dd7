"""Claude model ids and what each family accepts: the one place the harness (and the fake
Messages API) learn them.

Sources, as of the ``anthropic`` SDK this project pins (2.14.0): the ids are the
SDK's ``types/model.py`` literal; retirement dates its ``_data/deprecated_models.py``;
per-family thinking, effort, sampling and prefill rules Anthropic's "Troubleshooting
thinking", "What's new in Claude Sonnet 5.5 / Opus 5.5 / Haiku 5.5" pages; minimum
cacheable prompt lengths the "Prompt caching" page (512 tokens on the 5.5 models,
Opus 5, Fable 5 and Mythos 5; 1,024 on Sonnet 5, Opus 4.7/4.8 and Sonnet 4.x; 4,096 on
Haiku 4.5 and Opus 4.5/4.6).

>>> spec("claude-sonnet-5-5").thinking_types
('adaptive', 'between_tools')
>>> DEFAULT_MODEL
'claude-sonnet-5-5'
>>> lifecycle("claude-sonnet-4-5"), lifecycle("claude-opus-4-5"), lifecycle("nope")
('retired', 'deprecated', None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Lifecycle = Literal["active", "deprecated", "retired"]
ThinkingType = Literal["adaptive", "enabled", "disabled", "between_tools"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]

EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The default ``WARROOM_MODEL``: Anthropic's "best combination of speed and intelligence"."""

DEFAULT_SMALL_MODEL = "claude-haiku-5-5"
"""The default ``WARROOM_SMALL_MODEL``, which reads WebFetch's pages: the fast family (Claude
Code uses its small, fast model for the same job)."""

DEFAULT_MAX_TOKENS = 32_000
"""Default ``max_tokens`` of one call: thinking counts toward it (SDK ``ThinkingConfigParam``
docstring), so it holds adaptive thinking plus a long answer or a large ``Write`` call
(Claude Code's default output cap is the same figure)."""


@dataclass(frozen=True)
class ModelSpec:
    """What one model id accepts.

    Attributes:
        id: the API's model id.
        lifecycle: ``active``, ``deprecated`` (callable, retiring) or ``retired`` (404).
        thinking_types: ``thinking.type`` values the model accepts; others get a 400.
        display: whether ``thinking.display`` (``summarized``/``omitted``) is accepted.
        efforts: ``output_config.effort`` levels accepted (empty: no effort parameter).
        sampling: non-default ``temperature``/``top_p``/``top_k`` accepted.
        prefill: a final assistant turn (prefill) accepted.
        max_output_tokens: the largest ``max_tokens``.
        context_tokens: the context window (prompt plus output).
        min_cache_tokens: the shortest prefix a cache breakpoint writes.
        retires: the retirement date (ISO), when one is known.
    """

    id: str
    lifecycle: Lifecycle
    thinking_types: tuple[ThinkingType, ...]
    display: bool
    efforts: tuple[Effort, ...]
    sampling: bool
    prefill: bool
    max_output_tokens: int
    context_tokens: int
    min_cache_tokens: int
    retires: str | None = None

    def adaptive(self) -> bool:
        """Whether ``thinking: {type: adaptive}`` is accepted."""
        return "adaptive" in self.thinking_types


def _family(
    ids: tuple[str, ...],
    thinking: tuple[ThinkingType, ...],
    *,
    efforts: tuple[Effort, ...] = EFFORTS,
    sampling: bool = False,
    prefill: bool = False,
    max_output: int = 128_000,
    context: int = 1_000_000,
    min_cache: int = 512,
    lifecycle: Lifecycle = "active",
    retires: str | None = None,
) -> list[ModelSpec]:
    display = "adaptive" in thinking or "enabled" in thinking
    return [
        ModelSpec(
            i,
            lifecycle,
            thinking,
            display,
            efforts,
            sampling,
            prefill,
            max_output,
            context,
            min_cache,
            retires,
        )
        for i in ids
    ]


_ALWAYS_ADAPTIVE: tuple[ThinkingType, ...] = ("adaptive",)
_LEGACY: tuple[ThinkingType, ...] = ("enabled", "disabled")

MODELS: dict[str, ModelSpec] = {
    spec.id: spec
    for spec in [
        *_family(("claude-sonnet-5-5",), ("adaptive", "between_tools")),
        *_family(("claude-haiku-5-5",), ("adaptive", "disabled")),
        *_family(
            (
                "claude-opus-5-5",
                "claude-fable-5-2",
                "claude-mythos-5-2",
                "claude-fable-5-1",
                "claude-mythos-5-1",
                "claude-fable-5",
                "claude-mythos-5",
            ),
            _ALWAYS_ADAPTIVE,
        ),
        *_family(("claude-opus-5",), ("adaptive", "disabled")),
        *_family(("claude-sonnet-5",), ("adaptive", "disabled"), min_cache=1024),
        *_family(("claude-opus-4-8", "claude-opus-4-7"), ("adaptive", "disabled"), min_cache=1024),
        *_family(
            ("claude-opus-4-6", "claude-sonnet-4-6"),
            ("adaptive", *_LEGACY),
            sampling=True,
            min_cache=4096,
        ),
        *_family(
            ("claude-haiku-4-5", "claude-haiku-4-5-20251001"),
            _LEGACY,
            efforts=(),
            sampling=True,
            prefill=True,
            max_output=64_000,
            context=200_000,
            min_cache=4096,
        ),
        *_family(
            ("claude-opus-4-5", "claude-opus-4-5-20251101"),
            _LEGACY,
            efforts=(),
            sampling=True,
            prefill=True,
            max_output=64_000,
            context=200_000,
            min_cache=4096,
            lifecycle="deprecated",
            retires="2027-01-22",
        ),
        *_family(
            ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
            _LEGACY,
            efforts=(),
            sampling=True,
            prefill=True,
            max_output=64_000,
            context=200_000,
            min_cache=1024,
            lifecycle="retired",
            retires="2026-11-30",
        ),
        *_family(
            ("claude-mythos-preview",),
            ("adaptive", "enabled"),
            min_cache=1024,
            lifecycle="retired",
            retires="2026-06-30",
        ),
    ]
}
"""Every model id the pinned SDK names, by id."""


def spec(model: str) -> ModelSpec:
    """The spec of ``model``.

    Raises:
        KeyError: an id the pinned SDK does not name.
    """
    return MODELS[model]


def lifecycle(model: str) -> Lifecycle | None:
    """``active``, ``deprecated`` or ``retired``; None for an id the SDK does not name."""
    found = MODELS.get(model)
    return found.lifecycle if found else None


def current_models() -> tuple[str, ...]:
    """Ids that can be called (active and deprecated), in catalogue order."""
    return tuple(i for i, s in MODELS.items() if s.lifecycle != "retired")
