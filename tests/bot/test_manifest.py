"""manifest.yml creates the Slack app Warroom expects (docs/architecture.md §9)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

MANIFEST = Path(__file__).parents[2] / "manifest.yml"
SOURCE = Path(__file__).parents[2] / "bot"
# Each Web API method the bot calls → the bot scope it needs (docs.slack.dev, the method's
# "Scopes"); None: no scope. A method missing here fails the test: look its scope up.
METHOD_SCOPES: dict[str, str | None] = {
    "auth_test": None,
    "apps_connections_open": None,  # the app-level token's connections:write, not a bot scope
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "assistant_threads_setStatus": "chat:write",
    "agents_sessions_setStatus": "chat:write",
    "chat_startStream": "chat:write",
    "chat_appendStream": "chat:write",
    "chat_stopStream": "chat:write",
    "conversations_replies": "channels:history",  # groups:history in private channels
    "files_upload_v2": "files:write",
    "files_info": "files:read",
    "usergroups_users_list": "usergroups:read",
    "views_open": None,
    "views_update": None,
    "views_push": None,
}
# What the manifest's features need besides method calls.
FEATURE_SCOPES = {
    "app_mentions:read",  # the app_mention event
    "channels:history",  # message.channels
    "groups:history",  # message.groups (and conversations.replies in private channels)
    "commands",  # /agent
    "files:read",  # url_private downloads of small text files people share (slack/files.py)
}
_FAMILIES = (
    "admin|agents|apps|assistant|auth|bookmarks|bots|canvases|chat|conversations|dnd|emoji|files|"
    "pins|reactions|reminders|search|stars|team|usergroups|users|views"
)
_CALL = re.compile(rf"client\.((?:{_FAMILIES})_[A-Za-z0-9_]+)\(")


def called_methods() -> set[str]:
    """Web API methods called through a client anywhere in the product code."""
    found: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        if "fakes" not in path.parts:
            found.update(_CALL.findall(path.read_text()))
    return found


@pytest.fixture(scope="module")
def manifest() -> Any:
    return yaml.safe_load(MANIFEST.read_text())


def test_manifest_uses_socket_mode_with_interactivity(manifest: Any) -> None:
    settings = manifest["settings"]

    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["event_subscriptions"]["bot_events"] == [
        "app_mention",
        "message.channels",
        "message.groups",
        "agent_session_stopped",
    ]


def test_manifest_declares_the_agent_command_and_an_always_online_bot(manifest: Any) -> None:
    features = manifest["features"]

    assert [c["command"] for c in features["slash_commands"]] == ["/agent"]
    assert features["bot_user"]["always_online"] is True


def test_manifest_requests_exactly_the_scopes_the_code_calls_for(manifest: Any) -> None:
    calls = called_methods()
    unknown = calls - set(METHOD_SCOPES)
    needed = FEATURE_SCOPES | {scope for m in calls if (scope := METHOD_SCOPES.get(m))}

    scopes = manifest["oauth_config"]["scopes"]["bot"]

    assert not unknown, f"look up the scopes of {sorted(unknown)} and add them to METHOD_SCOPES"
    assert len(scopes) == len(set(scopes))
    assert set(scopes) == needed


def test_manifest_subscribes_to_the_native_stop_of_agent_sessions(manifest: Any) -> None:
    """Without it ``agents.sessions.setStatus`` warns
    ``missing_agent_session_stopped_event_subscription`` and Slack shows no Stop."""
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "agent_session_stopped" in events
