"""Prometheus metrics: steps, tokens, tool calls, sandbox events and Slack errors are counted
and served over HTTP."""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from bot.cli.terminal import TerminalReporter
from bot.durable.wiring import Runtime
from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply
from bot.logs import LogContext, current_context
from bot.metrics import (
    CountingProvider,
    Metrics,
    StepOutcome,
    StepReport,
    default_metrics,
    start_metrics_server,
)
from bot.settings import Settings
from harness import (
    Checkpoint,
    ModelResponded,
    Notice,
    NoticeTopic,
    Requester,
    StepKind,
    ToolFinished,
    ToolIntent,
    ToolUnknown,
    Usage,
)
from memory_store import SessionKey
from sandbox_client import LocalConfig, LocalProvider
from tests.conftest import require_bwrap


@pytest.fixture
def metrics() -> Metrics:
    """Metrics in a registry of their own."""
    return Metrics(CollectorRegistry())


def value(metrics: Metrics, name: str, **labels: str) -> float:
    """A sample's value (0 when it was never set)."""
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def finished(name: str, *, is_error: bool) -> ToolFinished:
    return ToolFinished("toolu_1", name, f"{name} call", is_error, 10, "out")


def test_a_model_step_counts_the_step_its_latency_and_tokens_by_kind(metrics: Metrics) -> None:
    usage = Usage(input_tokens=120, output_tokens=30, cache_read_input_tokens=900)
    event = ModelResponded("tool_use", "", ("Bash",), usage, 1)

    metrics.observe_step(StepReport(StepKind.MODEL, StepOutcome.STEPPED, 2.5, (event,)))

    assert value(metrics, "warroom_steps_total", kind="model", outcome="stepped") == 1
    assert value(metrics, "warroom_step_seconds_count", kind="model") == 1
    assert value(metrics, "warroom_step_seconds_sum", kind="model") == 2.5
    assert value(metrics, "warroom_model_tokens_total", kind="input") == 120
    assert value(metrics, "warroom_model_tokens_total", kind="output") == 30
    assert value(metrics, "warroom_model_tokens_total", kind="cache_read") == 900
    assert value(metrics, "warroom_model_tokens_total", kind="cache_write") == 0


def test_tool_calls_are_counted_by_tool_and_outcome(metrics: Metrics) -> None:
    events = (
        ToolIntent("toolu_1", "Bash", "kubectl get pods"),
        finished("Bash", is_error=False),
        finished("Bash", is_error=True),
        finished("Read", is_error=False),
        ToolUnknown("toolu_2", "Bash", "deploy"),
    )

    metrics.observe_step(StepReport(StepKind.TOOL, StepOutcome.STEPPED, 0.1, events))

    assert value(metrics, "warroom_tool_calls_total", tool="Bash", outcome="ok") == 1
    assert value(metrics, "warroom_tool_calls_total", tool="Bash", outcome="error") == 1
    assert value(metrics, "warroom_tool_calls_total", tool="Read", outcome="ok") == 1
    assert value(metrics, "warroom_tool_calls_total", tool="Bash", outcome="unknown") == 1


def test_a_replaced_sandbox_notice_counts_as_a_replace(metrics: Metrics) -> None:
    notice = Notice(NoticeTopic.SANDBOX_REPLACED, "The sandbox was replaced.")

    metrics.observe_step(
        StepReport(
            StepKind.TOOL, StepOutcome.STEPPED, 0.1, (notice, Notice(NoticeTopic.LIMIT, "x"))
        )
    )

    assert value(metrics, "warroom_sandbox_events_total", event="replace") == 1


def test_slack_errors_are_counted_by_method_and_error(metrics: Metrics) -> None:
    metrics.count_slack_error("chat.postMessage", "ratelimited")
    metrics.count_slack_error("chat.postMessage", "ratelimited")

    assert (
        value(
            metrics,
            "warroom_slack_api_errors_total",
            method="chat.postMessage",
            error="ratelimited",
        )
        == 2
    )


def test_the_metrics_server_serves_the_counters_over_http(metrics: Metrics) -> None:
    metrics.observe_step(StepReport(StepKind.POST, StepOutcome.POSTED, 0.3))
    server = start_metrics_server(0, addr="127.0.0.1", registry=metrics.registry)
    try:
        response = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5.0)
    finally:
        server.close()

    assert response.status_code == 200
    assert 'warroom_steps_total{kind="post",outcome="posted"} 1.0' in response.text


@pytest.fixture
def short_state_dir() -> Iterator[Path]:
    """A short sandbox state directory (Unix socket paths must stay under 108 bytes)."""
    require_bwrap()
    path = Path(tempfile.mkdtemp(prefix="wr-met-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_a_counting_provider_counts_provision_suspend_and_resume(
    metrics: Metrics, short_state_dir: Path
) -> None:
    provider = CountingProvider(LocalProvider(LocalConfig(state_dir=short_state_dir)), metrics)
    handle = await provider.provision("sbx-metrics")
    try:
        await provider.suspend(handle)
        await provider.resume(handle)
    finally:
        await provider.destroy(handle)
        await provider.aclose()

    assert provider.kind == "local"
    for event in ("provision", "suspend", "resume"):
        assert value(metrics, "warroom_sandbox_events_total", event=event) == 1


async def test_a_driven_session_moves_the_process_counters_inside_its_log_context(
    tmp_path: Path,
) -> None:
    # Given a real runtime whose model is the fake Messages API
    todos = [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking pods"}]
    script = [Reply.tool("TodoWrite", {"todos": todos}), Reply.text("Pods are fine.")]
    before = {
        (name, tuple(sorted(labels.items()))): value(default_metrics(), name, **labels)
        for name, labels in COUNTED
    }
    tokens_before = tokens()
    async with FakeAnthropicAPI(script) as fake:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            anthropic_api_key=SecretStr("fake-key"),
            anthropic_base_url=fake.base_url,
            database_url=None,
            data_dir=tmp_path,
        )
        woken: list[tuple[str, str]] = []

        async def enqueue(session_id: str, token: str) -> None:
            woken.append((session_id, token))

        out = io.StringIO()
        runtime = await Runtime.open(settings, enqueue=enqueue, reporter=TerminalReporter(out))
        contexts: list[LogContext] = []
        count = runtime.driver.observe

        def observe(report: StepReport) -> None:
            contexts.append(current_context())
            count(report)

        runtime.driver.observe = observe
        try:
            opened = await runtime.sessions.open_or_join(
                SessionKey("T1", "C1", "1.0"),
                requester_id="U1",
                initial_checkpoint=Checkpoint("s-metrics", "T1", "C1", Requester("U1")).to_json(),
                text="checkout is down",
                source_ts="1.0",
                session_id="s-metrics",
            )
            assert opened.token is not None

            # When the driver runs every step until the answer is posted
            woken.append((opened.session_id, opened.token))
            while woken:
                await runtime.driver.run(*woken.pop(0))
        finally:
            await runtime.close()

    # Then each kind of step, the tool call and the tokens were counted
    after = {key: value(default_metrics(), key[0], **dict(key[1])) for key in before}
    moved = {key[0] + str(dict(key[1])): after[key] - before[key] for key in before}
    assert moved == {
        "warroom_steps_total{'kind': 'model', 'outcome': 'stepped'}": 2,
        "warroom_steps_total{'kind': 'tool', 'outcome': 'stepped'}": 1,
        "warroom_steps_total{'kind': 'post', 'outcome': 'posted'}": 1,
        "warroom_step_seconds_count{'kind': 'model'}": 2,
        "warroom_tool_calls_total{'outcome': 'ok', 'tool': 'TodoWrite'}": 1,
    }
    assert tokens() - tokens_before > 100  # two model calls' prompts and outputs
    assert "warroom> Pods are fine." in out.getvalue()
    assert set(contexts) == {LogContext("s-metrics", "T1", "C1")}


def tokens() -> float:
    kinds = ("input", "output", "cache_read", "cache_write")
    return sum(value(default_metrics(), "warroom_model_tokens_total", kind=k) for k in kinds)


COUNTED = [
    ("warroom_steps_total", {"kind": "model", "outcome": "stepped"}),
    ("warroom_steps_total", {"kind": "tool", "outcome": "stepped"}),
    ("warroom_steps_total", {"kind": "post", "outcome": "posted"}),
    ("warroom_step_seconds_count", {"kind": "model"}),
    ("warroom_tool_calls_total", {"tool": "TodoWrite", "outcome": "ok"}),
]
