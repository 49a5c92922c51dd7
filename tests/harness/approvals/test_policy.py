"""The approval policy: Bash commands classified from the guard's walk, requests, MCP tools."""

from __future__ import annotations

import pytest

from harness.approvals import (
    EgressReach,
    Policy,
    PolicyError,
    Verdict,
    default_policy,
    mcp_decision,
    parse_policy,
    request_decision,
    with_org_policy,
)
from harness.guard.calls import program_calls
from harness.guard.check import Allow, check_bash
from harness.mcp.policy import Approval
from sandbox_client.gateway import Rules

ALLOWED, APPROVAL, BLOCKED = Verdict.ALLOWED, Verdict.APPROVAL, Verdict.BLOCKED


def verdict(command: str, policy: Policy | None = None) -> Verdict:
    return (policy or default_policy()).bash(command).verdict


@pytest.mark.parametrize(
    "command",
    [
        "kubectl get pods -n prod",
        "kubectl -n prod describe deploy/api",
        "kubectl logs -n prod api-7d9 --since=10m",
        "kubectl top pods --sort-by=memory",
        "kubectl events -n prod",
        "kubectl get events -A | tail -20",
        "kubectl rollout status deploy/api",
        "kubectl rollout history deploy/api",
        "kubectl get secrets",
        "helm list -A",
        "helm history api",
        "systemctl status nginx",
        "journalctl -u nginx --since today",
        "psql -h db -c 'select count(*) from orders'",
        "echo 'SELECT 1; SHOW work_mem' | psql -h db",
        "psql -h db -c \"select * from t where note = 'drop table x'\"",
        "psql -l",
        "promtool query instant http://prom:9090 up",
        "git log --oneline -5 && git show HEAD && git diff HEAD~1",
        "curl -s http://prom:9090/api/v1/query?query=up",
        "ls -la; python3 analyse.py; jq . out.json",
        "rm -rf /workspace/tmp",
        "aws s3 ls s3://logs",
        "some-unknown-tool --flag value",
    ],
)
def test_reads_and_unknown_programs_are_allowed(command: str) -> None:
    assert verdict(command) is ALLOWED


@pytest.mark.parametrize(
    "command",
    [
        "kubectl apply -f deploy.yaml",
        "kubectl create namespace x",
        "kubectl delete pod api-7d9",
        "kubectl patch deploy api -p '{}'",
        "kubectl edit cm api",
        "kubectl scale deploy/api --replicas=0",
        "kubectl rollout restart deploy/api",
        "kubectl rollout undo deploy/api",
        "kubectl drain node-1 --ignore-daemonsets",
        "kubectl cordon node-1",
        "kubectl uncordon node-1",
        "kubectl label pod x a=b",
        "kubectl annotate pod x a=b",
        "kubectl -n prod --context prod-eu delete pod x",
        "kubectl --namespace=prod delete pod x",
        "oc delete pod x",
        "helm install api ./chart",
        "helm upgrade api ./chart -n prod",
        "helm rollback api 3",
        "helm uninstall api",
        "systemctl start nginx",
        "systemctl stop nginx",
        "systemctl restart nginx",
        "service nginx restart",
        "psql -h db -c 'DELETE FROM sessions'",
        "psql -h db -c 'ALTER TABLE t ADD COLUMN c int'",
        "psql -h db -c 'WITH x AS (DELETE FROM jobs RETURNING id) SELECT * FROM x'",
        "psql -h db -c 'select pg_terminate_backend(123)'",
        "psql -h db <<'EOF'\nUPDATE pool SET size = 20;\nEOF",
        "psql -h db -f fix.sql",
        'psql -h db -c "$QUERY"',
        "cat fix.sql | psql -h db",
        "mysql -h db -e 'drop table t'",
        "git push origin main",
        "aws ec2 terminate-instances --instance-ids i-1",
    ],
)
def test_changes_need_approval(command: str) -> None:
    assert verdict(command) is APPROVAL


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'kubectl delete pod x'",
        'sh -c "kubectl rollout restart deploy/api"',
        "echo pod/api-7d9 | xargs kubectl delete",
        "kubectl get pods -o name | xargs kubectl delete",
        "kubectl get pods -o name | xargs -I{} kubectl delete {}",
        "env KUBECONFIG=/workspace/k kubectl scale deploy/api --replicas=0",
        "sudo -u ops kubectl drain node-1",
        "timeout 30 kubectl rollout undo deploy/api",
        "K=kubectl; $K delete pod x",
        "VERB=delete; kubectl $VERB pod x",
        "for verb in get delete; do kubectl $verb pod x; done",
        "eval 'kubectl delete ns staging'",
        "restart() { kubectl rollout restart deploy/$1; }; restart api",
        "echo 'kubectl cordon node-1' | bash",
        "bash <<'EOF'\nkubectl delete pod x\nEOF",
        "find . -name '*.yaml' -exec kubectl apply -f {} \\;",
        "x=$(kubectl delete pod y)",
        "nohup nice -n 5 kubectl delete pod x",
        "python3 -c 'import os; os.system(\"kubectl delete pod x\")'",
    ],
)
def test_a_change_hidden_behind_wrappers_and_variables_needs_approval(command: str) -> None:
    decision = default_policy().bash(command)
    assert decision.verdict is APPROVAL, decision
    assert "kubectl" in decision.reason


def test_the_reason_names_the_call_as_the_guard_expanded_it() -> None:
    decision = default_policy().bash("K=kubectl; NS=prod; $K -n $NS rollout restart deploy/api")
    assert (
        decision.reason
        == "`kubectl -n prod rollout restart deploy/api` changes the cluster's resources"
    )


def test_an_unknown_word_may_be_a_change_so_it_needs_approval_but_is_never_blocked() -> None:
    for command in ("kubectl $VERB deploy/api", "$KUBECTL delete pod x", "rm -rf $DIR/"):
        decision = default_policy().bash(command)
        assert decision.verdict is APPROVAL, command
        assert "only known when it runs" in decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf /*",
        "rm -fr ~",
        "rm -r -f /etc",
        "sudo rm -rf --no-preserve-root /",
        "bash -c 'rm -rf /'",
        "kubectl get secret db-creds -o yaml",
        "kubectl get secrets -n prod -o json",
        "kubectl config view --raw",
        "aws secretsmanager get-secret-value --secret-id prod/db",
        "aws ssm get-parameter --name /db/pw --with-decryption",
        "vault kv get secret/db",
        "gcloud auth print-access-token",
        "cat ~/.kube/config",
        "cat /var/run/secrets/kubernetes.io/serviceaccount/token",
        "dd if=/dev/zero of=/dev/sda",
        "mkfs.ext4 /dev/sdb1",
    ],
)
def test_destruction_and_credential_dumping_are_blocked(command: str) -> None:
    assert verdict(command) is BLOCKED


def test_the_most_restrictive_program_decides() -> None:
    assert verdict("kubectl get pods && kubectl delete pod x") is APPROVAL
    assert verdict("kubectl delete pod x; rm -rf /") is BLOCKED


def test_a_walk_that_gave_up_needs_approval_when_the_text_names_a_guarded_program() -> None:
    hidden = "id;" * 20_000 + "kubectl delete pod x"
    assert isinstance(check_bash(hidden), Allow)  # the guard lets an inert give-up through
    seen = program_calls(hidden)
    assert not seen.complete
    assert all(call.name == "id" for call in seen.calls)  # the delete was never reached
    decision = default_policy().bash(hidden)
    assert decision.verdict is APPROVAL
    assert "could not follow" in decision.reason
    assert "kubectl" in decision.reason
    assert verdict("id;" * 20_000 + "uptime") is ALLOWED


def test_http_clients_need_approval_for_a_change_through_a_credential_rule() -> None:
    rules = Rules.parse(
        "rules:\n- name: pagerduty\n  hosts: [api.pagerduty.com]\n  ports: [443]\n"
        "  methods: [GET, HEAD, POST, PUT, PATCH, DELETE]\n"
        "  inject: {type: bearer, token: {env: PD}}\n"
        "- name: hooks\n  hosts: [example.com]\n  methods: [POST]\n"
    )
    reach = EgressReach(rules)
    policy = default_policy()

    def decide(command: str) -> Verdict:
        return policy.bash(command, reach=reach).verdict

    assert decide("curl -s https://api.pagerduty.com/incidents") is ALLOWED
    assert decide("curl -X POST https://api.pagerduty.com/incidents -d '{}'") is APPROVAL
    assert decide("curl -d status=resolved https://api.pagerduty.com/incidents/1") is APPROVAL
    assert decide("curl -G -d q=x https://api.pagerduty.com/incidents") is ALLOWED
    assert decide("M=PUT; curl -X $M https://api.pagerduty.com/x") is APPROVAL
    assert decide("http PATCH api.pagerduty.com/incidents/1 status=resolved") is BLOCKED  # :80
    assert decide("https api.pagerduty.com/incidents/1 status=resolved") is APPROVAL
    assert decide("wget --method=DELETE https://api.pagerduty.com/x") is APPROVAL
    assert decide("curl -X POST https://example.com/hook") is APPROVAL  # an allow rule too
    assert decide("bash -c 'curl -XPOST https://api.pagerduty.com/x'") is APPROVAL


def test_requests_and_mcp_tools() -> None:
    assert request_decision("DELETE", credential_rule="grafana").verdict is APPROVAL
    assert request_decision("HEAD", credential_rule="grafana").verdict is ALLOWED
    assert request_decision("POST", credential_rule=None).verdict is ALLOWED
    assert mcp_decision(Approval.ALLOW, "mcp__g__q").verdict is ALLOWED
    assert mcp_decision(Approval.ASK, "mcp__g__q").verdict is APPROVAL
    assert mcp_decision(Approval.DENY, "mcp__g__q").verdict is BLOCKED


ORG = """
[program.deployctl]
value_options = "--env"

[[rule]]
programs = ["deployctl"]
words = "promote | rollback"
decision = "approval"
reason = "changes what runs in an environment"

[[rule]]
programs = ["kubectl"]
words = "logs"
options = "--all-containers"
decision = "approval"
reason = "reads every container's logs"

[[rule]]
programs = ["kubectl"]
words = "exec"
decision = "allowed"
reason = "our pods run read-only shells"

[[rule]]
programs = ["rm"]
decision = "allowed"
reason = "the sandbox is disposable"
"""


def test_an_org_file_extends_tightens_and_loosens_but_never_lifts_a_block() -> None:
    policy = with_org_policy(ORG, source="org.toml")
    assert verdict("deployctl --env prod promote api", policy) is APPROVAL
    assert verdict("deployctl --env prod status", policy) is ALLOWED
    assert verdict("kubectl logs api --all-containers", policy) is APPROVAL
    assert verdict("kubectl logs api", policy) is ALLOWED
    assert verdict("kubectl exec api -- ls", policy) is ALLOWED
    assert verdict("kubectl delete pod x", policy) is APPROVAL  # shipped rules still apply
    assert verdict("rm -rf /", policy) is BLOCKED


def test_an_org_file_may_drop_the_shipped_rules() -> None:
    policy = with_org_policy("defaults = false\n" + ORG, source="org.toml")
    assert verdict("kubectl delete pod x", policy) is ALLOWED
    assert verdict("deployctl rollback api", policy) is APPROVAL


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[rule]]\nprograms = ['x']\ndecision = 'maybe'\nreason = 'r'", "decision must be"),
        ("[[rule]]\nprograms = []\ndecision = 'approval'\nreason = 'r'", "programs must be"),
        ("[[rule]]\nprograms = ['x']\ndecision = 'approval'", "reason must say"),
        ("[[rule]]\nprograms = ['x']\ndecision = 'approval'\nreason = 'r'\nsql = 'read'", "sql"),
        ("[[rule]]\nprograms = ['x']\ndecision = 'blocked'\nreason = 'r'\ncolour = 1", "colour"),
        ("[program.x]\nvalue_options = ['-n']", "space-separated"),
        ("rules = 1", "unknown top-level"),
        ("[[rule]\n", "not valid TOML"),
    ],
)
def test_a_malformed_policy_file_is_refused_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        parse_policy(text, source="org.toml")


def test_the_shipped_policy_parses_and_has_every_rule_the_issue_lists() -> None:
    policy = default_policy()
    assert len(policy.rules) > 10
    assert {"kubectl", "helm", "systemctl", "psql"} <= set(policy.programs)


@pytest.mark.parametrize(
    "command", ["rm -rf /etc/", "rm -rf //", "rm -rf /./", "rm -rf /etc//", "rm -rf /usr/../etc"]
)
def test_a_system_directory_spelled_another_way_is_still_blocked(command: str) -> None:
    assert verdict(command) is BLOCKED


@pytest.mark.parametrize(
    "command",
    [
        "kubectl --v 9 delete pod x",
        "oc --v 9 delete pod x",
        "oc adm drain node-1",
        "oc adm cordon node-1",
        "oc adm taint nodes node-1 k=v:NoSchedule",
    ],
)
def test_kubectl_verbosity_and_oc_adm_node_changes_need_approval(command: str) -> None:
    assert verdict(command) is APPROVAL


@pytest.mark.parametrize(
    "command",
    [
        "terraform apply -auto-approve",
        "terraform -chdir=infra destroy",
        "terraform state rm aws_instance.api",
        "docker exec api rm -rf /data",
        "docker -H tcp://prod:2376 run --rm -v /:/h alpine rm -rf /h",
        "docker compose down",
        "docker-compose -f prod.yml stop",
    ],
)
def test_terraform_and_docker_exec_run_compose_changes_need_approval(command: str) -> None:
    assert verdict(command) is APPROVAL
