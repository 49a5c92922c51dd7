"""Re-export of ``bot.fakes.anthropic_api`` (the fake now ships with the product)."""

from bot.fakes.anthropic_api import *  # noqa: F403
from bot.fakes.anthropic_api import __all__ as __all__
