"""Changes disguised as ordinary shell: what the policy cannot see through needs approval
whenever the session can reach a change; reads stay allowed; the effective method decides;
a change the gateway refuses anyway is blocked, not asked about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import ApprovalGate
from harness.approvals import (
    EgressReach,
    NoNetwork,
    OpenNetwork,
    Verdict,
    default_policy,
    http_calls,
)
from harness.guard.calls import ProgramCall
from sandbox_client.gateway import Rules

ALLOWED, APPROVAL, BLOCKED = Verdict.ALLOWED, Verdict.APPROVAL, Verdict.BLOCKED
DATA = Path(__file__).parents[1] / "data"

RULES = """
rules:
- name: pagerduty
  hosts: [api.pagerduty.com]
  methods: [GET, HEAD, POST, PUT, PATCH, DELETE]
  inject: {type: bearer, token: {env: PD_TOKEN}}
- name: prom
  hosts: [prom.internal]
  ports: [9090]
- name: grafana
  hosts: [grafana.internal]
  inject: {type: bearer, token: {env: GRAFANA_TOKEN}}
- name: status
  hosts: [status.example.com]
  tunnel: true
"""
"""A session that can change PagerDuty, read Prometheus and Grafana (credential, GET only),
and reach a status page through a tunnel."""

READ_ONLY_RULES = "rules: [{name: prom, hosts: [prom.internal], ports: [9090]}]"


def _rows(name: str) -> list[dict[str, str]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


DISGUISES = _rows("approval_disguises.jsonl")
READS = [row["command"] for row in _rows("approval_reads.jsonl")]


def reach() -> EgressReach:
    return EgressReach(Rules.parse(RULES))


def test_the_corpus_holds_forty_disguises_of_our_own_and_the_issues_classes() -> None:
    assert sum(row["origin"] == "own" for row in DISGUISES) >= 40
    assert {row["class"] for row in DISGUISES if row["origin"] == "issue"} >= {
        "alias",
        "interpreter",
        "git",
        "unknown-origin",
        "build-tool",
        "method-override",
    }


@pytest.mark.parametrize(
    "row", DISGUISES, ids=[f"{r['class']}-{n}" for n, r in enumerate(DISGUISES)]
)
def test_a_disguised_change_needs_approval_or_is_blocked(row: dict[str, str]) -> None:
    decision = default_policy().bash(row["command"], reach=reach())
    assert decision.verdict.label == row["expect"], decision
    assert decision.reason


@pytest.mark.parametrize("command", READS)
def test_read_only_investigation_stays_allowed_with_a_change_in_reach(command: str) -> None:
    assert default_policy().bash(command, reach=reach()).verdict is ALLOWED


@pytest.mark.parametrize(
    "command",
    [
        "python3 -c 'print(sum(range(10)))'",
        "python3 analyse.py latency.csv",
        "make report",
        "./scripts/summarise.sh",
        "perl -ne 'print if /ERROR/' app.log",
        "awk '{ print | \"sort\" }' x",
        "git -c color.ui=never log",
    ],
)
def test_code_the_policy_cannot_read_is_allowed_when_nothing_changeable_is_in_reach(
    command: str,
) -> None:
    policy = default_policy()
    for nothing in (NoNetwork(), EgressReach(Rules.parse(READ_ONLY_RULES))):
        assert policy.bash(command, reach=nothing).verdict is ALLOWED, nothing
    decision = policy.bash(command, reach=reach())
    assert decision.verdict is APPROVAL
    assert "the egress rule 'pagerduty' holds a credential" in decision.reason


@pytest.mark.parametrize(
    ("rules", "why"),
    [
        ("rules: [{name: hook, hosts: [h.example], methods: [POST]}]", "'hook' allows POST"),
        (
            "rules: [{name: g, hosts: [g.example], inject: {type: bearer, token: {env: T}}}]",
            "'g' holds a credential",
        ),
        ("rules: [{name: s, hosts: [s.example], tunnel: true}]", "'s' tunnels HTTPS"),
    ],
)
def test_a_write_method_a_credential_or_a_tunnel_puts_a_change_in_reach(
    rules: str, why: str
) -> None:
    change = EgressReach(Rules.parse(rules)).change
    assert change is not None
    assert why in change
    assert EgressReach(Rules.parse(READ_ONLY_RULES)).change is None
    assert NoNetwork().change is None
    assert OpenNetwork().change is not None


def test_a_change_the_gateway_refuses_is_blocked_saying_which_methods_the_rule_allows() -> None:
    policy = default_policy()
    decision = policy.bash("curl -X DELETE http://prom.internal:9090/api/v1/x", reach=reach())
    assert decision.verdict is BLOCKED
    assert "DELETE is not allowed to prom.internal (only GET, HEAD)" in decision.reason
    assert "nobody can approve it" in decision.reason
    # a read the gateway refuses is its business (a 403), not a decision for a human
    assert policy.bash("curl https://elsewhere.example/", reach=reach()).verdict is ALLOWED
    # a method only known when it runs may be a read: never blocked
    unknown = policy.bash('curl -X "$M" http://prom.internal:9090/x', reach=reach())
    assert unknown.verdict is ALLOWED
    # without a gateway there is nobody to refuse: the rules alone decide
    assert policy.bash("curl -X DELETE http://prom.internal:9090/x").verdict is ALLOWED


def test_through_a_tunnel_any_https_method_passes_so_a_change_needs_approval() -> None:
    decision = default_policy().bash("curl -X DELETE https://status.example.com/x", reach=reach())
    assert decision.verdict is APPROVAL
    assert "'status' (a tunnel)" in decision.reason


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (("-X", "GET", "-H", "X-HTTP-Method-Override: DELETE", "h.example/x"), "DELETE"),
        (("-H", "x-http-method:put", "h.example/x"), "PUT"),
        (("-H", "X-Method-Override: patch", "h.example/x"), "PATCH"),
        (("h.example/x?a=1&_method=delete",), "DELETE"),
        (("-G", "--data", "_method=DELETE", "h.example/x"), "DELETE"),
        (("-H", "@headers.txt", "h.example/x"), "?"),
        (("-K", "req.cfg", "h.example/x"), "?"),
        (("-X", "POST", "-H", "X-HTTP-Method-Override: GET", "h.example/x"), "POST"),
        (("-H", "X-HTTP-Method-Override: GET", "h.example/x"), "GET"),
        (("-H", "X-Request-Id: DELETE", "h.example/x"), "GET"),
    ],
)
def test_curl_reports_the_effective_method(args: tuple[str, ...], method: str) -> None:
    (request,) = http_calls(ProgramCall("curl", args, ""))
    assert request.method == method


def test_curl_next_starts_a_new_set_of_options() -> None:
    args = ("-X", "DELETE", "h.example/a", "--next", "h.example/b", "-X", "GET")
    requests = http_calls(ProgramCall("curl", args, ""))
    assert [(r.method, r.url) for r in requests] == [
        ("DELETE", "http://h.example/a"),
        ("GET", "http://h.example/b"),
    ]


@pytest.mark.parametrize(
    ("call", "method"),
    [
        (
            ProgramCall("http", ("GET", "h.example/x", "X-HTTP-Method-Override:DELETE"), ""),
            "DELETE",
        ),
        (ProgramCall("http", ("h.example/x", "_method==put"), ""), "PUT"),
        (ProgramCall("http", ("h.example/x", "X-Trace:1"), ""), "GET"),
        (ProgramCall("wget", ("--header=X-HTTP-Method: DELETE", "h.example/x"), ""), "DELETE"),
        (ProgramCall("wget", ("-e", "method=DELETE", "h.example/x"), ""), "?"),
        (ProgramCall("wget", ("-e", "robots=off", "h.example/x"), ""), "GET"),
    ],
)
def test_httpie_and_wget_report_the_effective_method(call: ProgramCall, method: str) -> None:
    (request,) = http_calls(call)
    assert request.method == method


async def test_the_gate_judges_by_the_reach_it_is_given() -> None:
    command = {"command": "python3 -c 'import os; os.system(\"x\")'"}
    assert (await ApprovalGate(reach=reach()).decide("Bash", command)).verdict is APPROVAL
    assert (await ApprovalGate(reach=NoNetwork()).decide("Bash", command)).verdict is ALLOWED
    assert (await ApprovalGate().decide("Bash", command)).verdict is APPROVAL  # assume the worst
