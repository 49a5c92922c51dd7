"""manifest.yml creates the Slack app Warroom expects (docs/architecture.md §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

MANIFEST = Path(__file__).parents[2] / "manifest.yml"
ARCHITECTURE_SCOPES = {
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "channels:read",
    "groups:read",
    "chat:write",
    "commands",
    "files:write",
    "reactions:write",
    "users:read",
}


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
    ]


def test_manifest_declares_the_agent_command_and_an_always_online_bot(manifest: Any) -> None:
    features = manifest["features"]

    assert [c["command"] for c in features["slash_commands"]] == ["/agent"]
    assert features["bot_user"]["always_online"] is True


def test_manifest_bot_scopes_are_the_architectures_plus_usergroups_read(manifest: Any) -> None:
    scopes = manifest["oauth_config"]["scopes"]["bot"]

    assert len(scopes) == len(set(scopes))
    assert set(scopes) == ARCHITECTURE_SCOPES | {"usergroups:read"}
