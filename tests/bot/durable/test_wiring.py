"""The worker's Slack client, as the composition root builds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from bot.durable.wiring import approval_policies, make_slack_client, sandbox_reach
from bot.errors import SlackUnreachable, slack_call
from bot.settings import Settings
from harness import ApprovalGate, NoNetwork, OpenNetwork, PolicyError, Verdict
from tests.fakes.slack_api import FakeSlackApi


async def test_the_workers_slack_client_never_resends_a_post_after_a_connection_reset(
    slack_api: FakeSlackApi,
) -> None:
    settings = Settings(
        slack_bot_token=SecretStr(slack_api.token), slack_api_url=slack_api.base_url
    )
    client = make_slack_client(settings)
    slack_api.reset_after_next("chat.postMessage")

    with pytest.raises(SlackUnreachable):
        await slack_call("chat.postMessage", client.chat_postMessage(channel="C1", text="answer"))

    assert len(slack_api.calls_to("chat.postMessage")) == 1
    assert (await client.auth_test())["ok"]


DEPLOY_RULE = """
[[rule]]
programs = ["deployctl"]
decision = "approval"
reason = "deployctl changes what runs"
"""
STRICT_RULE = """
[[rule]]
programs = ["kubectl"]
words = "logs"
decision = "approval"
reason = "logs may hold customer data"
"""


async def test_a_policy_directory_gives_each_org_its_own_and_the_rest_the_default(
    tmp_path: Path,
) -> None:
    # Given a directory with a default policy and one org's own
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "default.toml").write_text(DEPLOY_RULE)
    (tmp_path / "policies" / "T0STRICT.toml").write_text(STRICT_RULE)
    settings = Settings(_env_file=None, approval_policy=tmp_path / "policies")  # type: ignore[call-arg]
    default, by_org = approval_policies(settings)
    gate = ApprovalGate(policy=default, org_policies=by_org)

    async def verdict(command: str, org_id: str) -> Verdict:
        return (await gate.decide("Bash", {"command": command}, org_id=org_id)).verdict

    # Then the strict org needs approval to read logs and the others do not; the default's
    # rule applies only to orgs without their own file, and the shipped rules to all
    assert await verdict("kubectl logs api", "T0STRICT") is Verdict.APPROVAL
    assert await verdict("kubectl logs api", "T0OTHER") is Verdict.ALLOWED
    assert await verdict("deployctl promote api", "T0OTHER") is Verdict.APPROVAL
    assert await verdict("deployctl promote api", "T0STRICT") is Verdict.ALLOWED
    assert await verdict("kubectl delete pod x", "T0STRICT") is Verdict.APPROVAL


def test_a_malformed_org_file_in_the_directory_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "T0BAD.toml").write_text("[[rule]]\nprograms = ['x']\ndecision = 'maybe'\n")
    settings = Settings(_env_file=None, approval_policy=tmp_path)  # type: ignore[call-arg]
    with pytest.raises(PolicyError, match=r"T0BAD\.toml"):
        approval_policies(settings)


@pytest.mark.parametrize("name", ["notanorg.toml", "t0123abcd.toml"])
def test_a_policy_file_not_named_after_an_org_id_is_refused(tmp_path: Path, name: str) -> None:
    # a name no org id can match would be loaded and never apply
    (tmp_path / name).write_text(STRICT_RULE)
    settings = Settings(_env_file=None, approval_policy=tmp_path)  # type: ignore[call-arg]
    with pytest.raises(PolicyError, match=r"named after the org it is for"):
        approval_policies(settings)


def test_a_policy_path_that_does_not_exist_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None, approval_policy=tmp_path / "nope.toml")  # type: ignore[call-arg]
    [error] = refused.value.errors()
    assert "does not exist: give a policy file or a directory of them" in error["msg"]


@pytest.mark.parametrize(
    ("network", "provider", "reach"),
    [("none", "local", NoNetwork), ("host", "local", OpenNetwork), ("none", "blaxel", OpenNetwork)],
)
async def test_the_gate_knows_what_a_sandbox_without_egress_rules_can_reach(
    network: str, provider: str, reach: type
) -> None:
    # Given no egress rules: a local jail reaches nothing, the host's network or a remote
    # sandbox's own reaches everything
    settings = Settings.model_validate({"sandbox_network": network, "sandbox_provider": provider})
    gate = ApprovalGate(reach=sandbox_reach(settings, None))
    assert isinstance(gate.reach, reach)
    # Then code the policy cannot read waits for a human only when a change is in reach
    decision = await gate.decide("Bash", {"command": "python3 fix.py"})
    assert decision.verdict is (Verdict.ALLOWED if reach is NoNetwork else Verdict.APPROVAL)
