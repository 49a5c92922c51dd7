"""Prometheus metrics: what the workers did, counted, and served over HTTP.

The metrics (``prometheus_client``):

- ``warroom_steps_total{kind,outcome}``: steps run; ``kind`` is a ``harness.StepKind``
  (``post``, ``model``, ``tool``, ``recover``, ``wait``) or ``none`` (a duplicate
  message), ``outcome`` a ``StepOutcome``;
- ``warroom_step_seconds{kind}``: how long a step took, claim to commit;
- ``warroom_model_tokens_total{kind}``: ``input``, ``output``, ``cache_read``,
  ``cache_write`` (Anthropic ``usage``);
- ``warroom_model_calls_total{model,priced}`` and ``warroom_model_cost_usd_total{model}``:
  answered model calls as the ledger records them (§14: a call whose step crashed
  included), and their cost priced from the price table (``priced="false"``: not in it);
- ``warroom_tool_calls_total{tool,outcome}``: ``ok``, ``error`` (``is_error``) or
  ``unknown`` (lost in a crash);
- ``warroom_sandbox_events_total{event}``: ``provision``, ``resume``, ``suspend``
  (counted by ``CountingProvider``; a replacement provisions too), ``replace``
  (from the step's ``sandbox_replaced`` notice), and the local warm pool's ``pooled`` (a
  jail started ahead for it) and ``pool_hit`` (a provision it answered with such a jail):
  jails started = ``provision`` − ``pool_hit`` + ``pooled``;
- ``warroom_slack_api_errors_total{method,error}``: failed Slack Web API calls.

One process (``warroom serve``) serves its registry with ``start_metrics_server``.
``warroom worker`` runs several Dramatiq processes: it sets
``PROMETHEUS_MULTIPROC_DIR`` so each process writes its counters to files there, and
Dramatiq forks ``serve_worker_metrics``, which serves their sum.
"""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

from bot.settings import Settings
from harness import (
    Event,
    ModelResponded,
    Notice,
    NoticeTopic,
    StepKind,
    ToolFinished,
    ToolUnknown,
    usd,
)
from memory_store import ModelCall
from sandbox_client import Health as SandboxHealth
from sandbox_client import SandboxClient, SandboxHandle, SandboxProvider, SandboxUsage

__all__ = [
    "MULTIPROC_DIR_VARIABLE",
    "CountingProvider",
    "Metrics",
    "MetricsServer",
    "StepOutcome",
    "StepReport",
    "default_metrics",
    "serve_worker_metrics",
    "start_metrics_server",
]

MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's multiprocess mode
STEP_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 660.0)


class StepOutcome(StrEnum):
    """What the durable driver's ``run`` did with a message, for metrics and tests."""

    SKIPPED = "skipped"  # duplicate or stale message
    STEPPED = "stepped"
    POSTED = "posted"
    WAITING = "waiting"
    FENCED = "fenced"
    REFUSED = "refused"  # Slack refused the answer for good; the session failed
    SETUP_FAILED = "setup_failed"  # no sandbox would start for the step; the session failed
    ERROR = "error"  # the step raised; the message is retried


@dataclass(frozen=True)
class StepReport:
    """One step as the driver saw it.

    Attributes:
        kind: what the step did (``StepKind``); None when nothing was claimed or the
            checkpoint could not be loaded (the metric's ``none``).
        outcome: what came of it.
        duration_s: claim to commit, seconds.
        events: the step's committed events.
    """

    kind: StepKind | None
    outcome: StepOutcome
    duration_s: float
    events: Sequence[Event] = field(default=())


class Metrics:
    """Warroom's counters in one registry (a fresh one per test, ``REGISTRY`` in production)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.steps = Counter("warroom_steps", "Steps run.", ["kind", "outcome"], registry=r)
        self.step_seconds = Histogram(
            "warroom_step_seconds", "Step latency.", ["kind"], buckets=STEP_BUCKETS_S, registry=r
        )
        self.tokens = Counter("warroom_model_tokens", "Model tokens.", ["kind"], registry=r)
        self.model_calls = Counter(
            "warroom_model_calls", "Answered model calls.", ["model", "priced"], registry=r
        )
        self.model_cost = Counter(
            "warroom_model_cost_usd", "Model spend, USD (price table).", ["model"], registry=r
        )
        self.tool_calls = Counter(
            "warroom_tool_calls", "Tool calls by outcome.", ["tool", "outcome"], registry=r
        )
        self.sandbox_events = Counter(
            "warroom_sandbox_events", "Sandbox lifecycle events.", ["event"], registry=r
        )
        self.slack_errors = Counter(
            "warroom_slack_api_errors", "Failed Slack API calls.", ["method", "error"], registry=r
        )
        self.egress_requests = Counter(
            "warroom_egress_requests",
            "Requests through the egress gateway.",
            ["outcome", "rule"],
            registry=r,
        )
        self.posts_refused = Counter(
            "warroom_slack_posts_refused",
            "Answers Slack refused for good (the session ended failed).",
            ["error"],
            registry=r,
        )

    def observe_step(self, report: StepReport) -> None:
        """Count one step and what its events say (tokens, tool calls, sandbox replaced)."""
        kind = report.kind.value if report.kind is not None else "none"
        self.steps.labels(kind, report.outcome.value).inc()
        self.step_seconds.labels(kind).observe(report.duration_s)
        for event in report.events:
            self._count_event(event)

    def count_model_call(self, call: ModelCall) -> None:
        """One answered model call and its cost (the ledger's row)."""
        self.model_calls.labels(call.model, str(call.priced).lower()).inc()
        self.model_cost.labels(call.model).inc(float(usd(call.cost_nanousd)))

    def count_sandbox(self, event: str) -> None:
        """One sandbox ``provision``, ``resume``, ``suspend``, ``replace``, ``pooled`` or
        ``pool_hit``."""
        self.sandbox_events.labels(event).inc()

    def count_egress(self, outcome: str, rule: str) -> None:
        """One request through the egress gateway (``outcome``: injected, allowed, blocked)."""
        self.egress_requests.labels(outcome=outcome, rule=rule).inc()

    def count_post_refused(self, error: str) -> None:
        """An answer Slack refused for good (``is_archived``, ``token_revoked``, …): its
        session ended failed."""
        self.posts_refused.labels(error).inc()

    def count_slack_error(self, method: str, error: str) -> None:
        """One failed Slack call: ``method`` (``chat.postMessage``) and Slack's ``error``."""
        self.slack_errors.labels(method, error).inc()

    def _count_event(self, event: Event) -> None:
        if isinstance(event, ModelResponded):
            usage = event.usage
            self.tokens.labels("input").inc(usage.input_tokens)
            self.tokens.labels("output").inc(usage.output_tokens)
            self.tokens.labels("cache_read").inc(usage.cache_read_input_tokens)
            self.tokens.labels("cache_write").inc(usage.cache_creation_input_tokens)
        elif isinstance(event, ToolFinished):
            self.tool_calls.labels(event.name, "error" if event.is_error else "ok").inc()
        elif isinstance(event, ToolUnknown):
            self.tool_calls.labels(event.name, "unknown").inc()
        elif isinstance(event, Notice) and event.topic is NoticeTopic.SANDBOX_REPLACED:
            self.count_sandbox("replace")


@functools.cache
def default_metrics() -> Metrics:
    """The process's metrics, in ``prometheus_client``'s global ``REGISTRY`` (made once)."""
    return Metrics(REGISTRY)


class CountingProvider:
    """A ``SandboxProvider`` that counts provisions, resumes and suspends, then delegates."""

    def __init__(self, inner: SandboxProvider, metrics: Metrics | None = None) -> None:
        self.inner = inner
        self.kind = inner.kind
        self._metrics = metrics or default_metrics()

    async def provision(self, sandbox_id: str) -> SandboxHandle:
        """``inner.provision``, counted as ``provision``."""
        handle = await self.inner.provision(sandbox_id)
        self._metrics.count_sandbox("provision")
        return handle

    async def resume(self, handle: SandboxHandle) -> None:
        """``inner.resume``, counted as ``resume``."""
        await self.inner.resume(handle)
        self._metrics.count_sandbox("resume")

    async def suspend(self, handle: SandboxHandle) -> None:
        """``inner.suspend``, counted as ``suspend``."""
        await self.inner.suspend(handle)
        self._metrics.count_sandbox("suspend")

    async def destroy(self, handle: SandboxHandle) -> None:
        """``inner.destroy``."""
        await self.inner.destroy(handle)

    async def health(self, handle: SandboxHandle) -> SandboxHealth:
        """``inner.health``."""
        return await self.inner.health(handle)

    async def list_sandboxes(self, *, older_than_s: float = 0.0) -> tuple[SandboxHandle, ...]:
        """``inner.list_sandboxes``."""
        return await self.inner.list_sandboxes(older_than_s=older_than_s)

    async def usage(self, handle: SandboxHandle) -> SandboxUsage:
        """``inner.usage``."""
        return await self.inner.usage(handle)

    def connect(self, handle: SandboxHandle) -> SandboxClient:
        """``inner.connect``."""
        return self.inner.connect(handle)

    async def aclose(self) -> None:
        """``inner.aclose``."""
        await self.inner.aclose()


@dataclass
class MetricsServer:
    """A running metrics endpoint (``GET /metrics``, any path) on ``port``."""

    port: int
    _server: WSGIServer

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()


class MetricsPortUnavailable(OSError):
    """``WARROOM_METRICS_PORT`` could not be listened on (in use, or not ours to bind): a
    setting to fix, not a crash."""

    def __init__(self, addr: str, port: int, reason: str) -> None:
        super().__init__(f"WARROOM_METRICS_PORT {port} cannot be listened on ({addr}): {reason}")
        self.addr = addr
        self.port = port


def start_metrics_server(
    port: int, *, addr: str = "0.0.0.0", registry: CollectorRegistry = REGISTRY
) -> MetricsServer:
    """Serve ``registry`` on ``addr:port`` (0: any free port) from a daemon thread.

    Raises:
        MetricsPortUnavailable: the port could not be bound.
    """
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise MetricsPortUnavailable(addr, port, exc.strerror or str(exc)) from exc
    return MetricsServer(int(server.server_port), server)


def check_metrics_port(port: int, *, addr: str = "0.0.0.0") -> None:
    """Bind ``addr:port`` and let it go at once: for ``warroom worker``, whose metrics are
    served later by a process Dramatiq starts, so a busy port is said before it starts.

    Raises:
        MetricsPortUnavailable: the port could not be bound.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind((addr, port))
        except OSError as exc:
            raise MetricsPortUnavailable(addr, port, exc.strerror or str(exc)) from exc


def serve_worker_metrics() -> int:
    """Serve the sum of every worker process's metrics until stopped (a Dramatiq fork function).

    The port is ``WARROOM_METRICS_PORT`` (``Settings``); the processes' files are in
    ``PROMETHEUS_MULTIPROC_DIR``, which ``warroom worker`` sets and
    ``prometheus_client`` reads. Returns 1 at once when either is missing.
    """
    port = Settings().metrics_port
    registry = CollectorRegistry()
    try:
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    except ValueError:  # prometheus_client: the directory is unset or missing
        return 1
    if port is None:
        return 1
    start_metrics_server(port, registry=registry)
    threading.Event().wait()  # the server thread is a daemon; Dramatiq's SIGTERM ends us
    return 0
