"""Errors raised by ``harness``.

Every error carries fields, not prose to parse. Foreign exceptions (``anthropic``,
``httpx2``) are translated in one place per boundary and raised ``from`` the
original. The tree::

    HarnessError
    ├── InvalidMessage       stored or wire JSON is not a valid message (also a ValueError)
    ├── LimitReached         a session limit was reached (``used``, ``limit``); ``advance``
    │   │                    catches it and ends the turn with a best-effort answer
    │   ├── StepLimitReached      steps (model + tool calls) ≥ ``Limits.max_steps``
    │   ├── TokenLimitReached     model tokens ≥ ``Limits.max_session_tokens``
    │   └── ToolTimeLimitReached  tool wall time (s) ≥ ``Limits.max_tool_time_s``
    ├── WorkspaceError       a sandbox operation the tools asked for failed
    │   ├── WorkspaceFileNotFound  the sandbox path does not exist (carries ``path``)
    │   ├── WorkspaceIsADirectory  a directory where a file was expected (``path``)
    │   ├── WorkspaceRefused       the sandbox refused a file call for good: a path it
    │   │                          does not serve, a file too large (``path``, ``reason``);
    │   │                          never retried
    │   ├── WorkspaceUnavailable   the sandbox could not be reached; retryable (``reason``)
    │   └── WorkspaceCannotStart   no sandbox will start on this host until a person fixes
    │                              it (``reason``); never retried: the session fails saying so
    └── ModelError           the model call failed
        ├── ModelUnavailable retryable failures (429, 529, 5xx, connection) outlasted
        │                    every attempt (carries ``status``, ``attempts``)
        ├── ModelRejected    the API refused the request: 400/401/403/404/413/…;
        │   │                never retried (carries ``status``, ``message``)
        │   └── ModelContextOverflow  the prompt does not fit the context window
        │                    (400 "prompt is too long", 413): compact, then ask again
        └── ModelStalled     the last attempt's stream went silent for
                             ``stall_timeout_s`` and no attempt was left
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class of every error ``harness`` raises on purpose."""


class InvalidMessage(HarnessError, ValueError):
    """A message, content block or usage record could not be parsed from JSON."""


class LimitReached(HarnessError):
    """A session limit was reached: the session must answer now, without more tools.

    Raised by ``Limits.enforce`` and caught in one place, ``advance``, which skips the
    pending tool calls and asks the model for a best-effort answer; it never escapes
    a step.

    Attributes:
        used: what the session used (steps, tokens, or seconds of tool wall time).
        limit: the configured maximum, in the same unit.
    """

    name = "limit"
    unit = ""

    def __init__(self, *, used: float, limit: float) -> None:
        super().__init__(
            f"The session reached its {self.name}: {used:g} {self.unit} used, {limit:g} allowed."
        )
        self.used = used
        self.limit = limit


class StepLimitReached(LimitReached):
    """Steps taken (model calls + tool calls) reached ``Limits.max_steps``."""

    name = "step limit"
    unit = "steps"


class TokenLimitReached(LimitReached):
    """Model tokens of the session (all kinds) reached ``Limits.max_session_tokens``."""

    name = "token limit"
    unit = "tokens"


class ToolTimeLimitReached(LimitReached):
    """Wall time spent running tools reached ``Limits.max_tool_time_s`` (seconds)."""

    name = "tool time limit"
    unit = "s of tool time"


class CostLimitReached(LimitReached):
    """Spend reached a cap (``Limits.max_session_cost_usd`` or ``max_org_day_cost_usd``).

    Unlike the other limits, no model call follows: the harness writes the best-effort
    answer itself (more calls would spend past the cap). ``used`` and ``limit`` are USD.
    """

    name = "spending cap"
    unit = "USD"

    def __init__(self, *, used: float, limit: float) -> None:
        super().__init__(used=used, limit=limit)
        self.args = (f"The {self.name} was reached: ${used:.2f} spent, ${limit:.2f} allowed.",)


class SessionCostLimitReached(CostLimitReached):
    """The session's spend reached ``Limits.max_session_cost_usd``."""

    name = "session's spending cap"


class OrgDayCostLimitReached(CostLimitReached):
    """The org's spend today (UTC) reached ``Limits.max_org_day_cost_usd``."""

    name = "organisation's daily spending cap"


class ModelError(HarnessError):
    """A model call failed; see the subclasses."""


class ModelUnavailable(ModelError):
    """Retryable failures lasted through every attempt.

    Attributes:
        status: HTTP status of the last failure (429, 529, 5xx), or None when it was a
            connection error or a stream cut short.
        attempts: how many requests were sent.
        request_id: the API's ``request-id`` of the last failure, when it sent one.
    """

    def __init__(self, *, status: int | None, attempts: int, request_id: str | None = None) -> None:
        what = f"HTTP {status}" if status is not None else "connection failure"
        super().__init__(f"model unavailable after {attempts} attempt(s): last was {what}")
        self.status = status
        self.attempts = attempts
        self.request_id = request_id


class ModelRejected(ModelError):
    """The API refused the request; sending it again would not help.

    Attributes:
        status: HTTP status (400, 401, 403, 404, 413, …).
        message: the API's ``error.message``.
        error_type: the API's ``error.type`` (``invalid_request_error``, …), if given.
        request_id: the API's ``request-id`` header, if given.
    """

    def __init__(
        self,
        *,
        status: int,
        message: str,
        error_type: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"model request rejected (HTTP {status}): {message}")
        self.status = status
        self.message = message
        self.error_type = error_type
        self.request_id = request_id


class ModelContextOverflow(ModelRejected):
    """The request does not fit: a 400 saying the prompt is too long, or 413
    ``request_too_large``. Deterministic, so never retried as is; the loop compacts the
    transcript and asks again."""


class ModelStalled(ModelError):
    """The stream sent nothing for ``stall_timeout_s`` on the last attempt left.

    Attributes:
        attempts: how many requests were sent.
        stall_timeout_s: the silence, in seconds, that counts as a stall.
    """

    def __init__(self, *, attempts: int, stall_timeout_s: float) -> None:
        super().__init__(
            f"model stream stalled (no data for {stall_timeout_s:g} s) on attempt {attempts}"
        )
        self.attempts = attempts
        self.stall_timeout_s = stall_timeout_s


class WorkspaceError(HarnessError):
    """Base class of the errors a ``Workspace`` (the tools' view of the sandbox) raises."""


class WorkspaceFileNotFound(WorkspaceError):
    """The sandbox path does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no such file in the sandbox: {path}")
        self.path = path


class WorkspaceIsADirectory(WorkspaceError):
    """The sandbox path is a directory where a file was expected."""

    def __init__(self, path: str) -> None:
        super().__init__(f"is a directory in the sandbox: {path}")
        self.path = path


class WorkspaceRefused(WorkspaceError):
    """The sandbox refused a file operation on ``path`` and would refuse it again.

    A permanent error (a 4xx from the sandbox: a path outside the roots it serves, a
    file over its read limit): the tool reports it to the model; the step is never
    retried for it.

    Attributes:
        path: the sandbox path of the call.
        reason: the sandbox's explanation.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"the sandbox refused {path}: {reason}")
        self.path = path
        self.reason = reason


class WorkspaceUnavailable(WorkspaceError):
    """The sandbox could not be reached; retryable (``reason`` says what failed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"sandbox unavailable: {reason}")
        self.reason = reason


class WorkspaceCannotStart(WorkspaceError):
    """No sandbox will start for this step until a person fixes the host (bubblewrap
    missing or refusing, a state directory that cannot be written, …); ``reason`` says
    what refused, in its own words.

    Not retryable: the step would fail the same way. The durable layer ends the session
    failed with ``reason`` in its thread; nothing of the step ran (its command needed the
    sandbox first), so the person's next message tries the step again.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"no sandbox could be started: {reason}")
        self.reason = reason
