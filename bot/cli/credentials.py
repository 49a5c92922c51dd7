"""Which credentials a command needs, checked before anything starts.

``warroom serve`` needs the Slack bot token, the app-level token (Socket Mode) or the
signing secret (HTTP mode), and the Anthropic key; ``warroom worker`` the bot token
(it posts answers) and the Anthropic key; ``warroom chat`` only the Anthropic key.
The Blaxel provider adds its key and workspace to each.
"""

from __future__ import annotations

from bot.settings import MissingSetting, Settings

__all__ = [
    "SLACK_HELP",
    "missing_for_chat",
    "missing_for_serve",
    "missing_for_worker",
]

SLACK_HELP = (
    "Create the Slack app from manifest.yml (README: 'Create the Slack app') and put its "
    "tokens in .env. To try Warroom without Slack, run `warroom chat` (needs only "
    "ANTHROPIC_API_KEY) or `warroom drill` (fake Slack and Anthropic APIs)."
)

_WHY = {
    "slack_bot_token": "Warroom posts to Slack with the bot token (xoxb-…)",
    "slack_app_token": "Socket Mode connects with an app-level token (xapp-…)",
    "slack_signing_secret": "HTTP mode verifies Slack's requests with the signing secret",
    "anthropic_api_key": "the agent calls Claude with this key",
    "bl_api_key": "the Blaxel sandbox provider needs an API key",
    "bl_workspace": "the Blaxel sandbox provider needs a workspace",
}


def missing_for_serve(settings: Settings) -> list[MissingSetting]:
    """Every credential ``serve`` needs that is unset, in the order to fix them."""
    slack = "slack_app_token" if settings.slack_mode == "socket" else "slack_signing_secret"
    return _missing(settings, ("slack_bot_token", slack, "anthropic_api_key"))


def missing_for_worker(settings: Settings) -> list[MissingSetting]:
    """Every credential a ``worker`` process needs that is unset."""
    return _missing(settings, ("slack_bot_token", "anthropic_api_key"))


def missing_for_chat(settings: Settings) -> list[MissingSetting]:
    """Every credential ``chat`` needs that is unset."""
    return _missing(settings, ("anthropic_api_key",))


def _missing(settings: Settings, names: tuple[str, ...]) -> list[MissingSetting]:
    if settings.sandbox_provider == "blaxel":
        names = (*names, "bl_api_key", "bl_workspace")
    found = []
    for name in names:
        try:
            settings.require(name, _WHY[name])
        except MissingSetting as missing:
            found.append(missing)
    return found
