"""Re-export of ``bot.fakes.slack_api`` (the fake now ships with the product)."""

from bot.fakes.slack_api import *  # noqa: F403
from bot.fakes.slack_api import __all__ as __all__
