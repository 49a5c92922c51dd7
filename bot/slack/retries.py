"""Which Slack calls the Web API client may send again by itself, and which it must not.

``slack_sdk``'s ``AsyncWebClient`` comes with ``AsyncConnectionErrorRetryHandler``: after a
connection error (``ServerDisconnectedError``, ``ClientOSError`` "connection reset by
peer") it sends the request again. For ``chat.postMessage`` that is a second message
whenever Slack had already accepted the first and only the answer was lost: Slack has
no idempotency key for posts (docs/architecture.md §5). So writes are never re-sent
below the outbox; the outbox owns their retries (it searches the thread for the post's
key before posting again, see ``poster``).

The client keeps two handlers (``install``):

- connection errors are retried once, only for methods that are safe to send twice
  (``RESENDABLE_METHODS``: reads, and writes that set a state rather than add one);
- HTTP 429 is waited out for ``Retry-After`` and retried, for every method: a request
  answered 429 was not served (docs.slack.dev, "Rate limits").
"""

from __future__ import annotations

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

RATE_LIMIT_RETRIES = 3

RESENDABLE_METHODS = frozenset(
    {
        "apps.connections.open",
        "assistant.threads.setStatus",  # sets the thread's status line
        "auth.test",
        "chat.update",  # sets the message's content
        "conversations.history",
        "conversations.replies",
        "files.getUploadURLExternal",  # an unused upload URL expires unused
        "files.info",
        "usergroups.users.list",
        "users.info",
        "views.update",  # sets the view (guarded by its hash)
    }
)
"""Methods a second identical request cannot harm. Not here, so never re-sent:
``chat.postMessage``, ``chat.postEphemeral``, ``files.completeUploadExternal`` (each adds
a message), ``views.open``/``views.push`` (the trigger is spent), ``reactions.add``."""


def method_of(url: str) -> str:
    """The Web API method a request URL calls.

    >>> method_of("https://slack.com/api/chat.postMessage?x=1")
    'chat.postMessage'
    """
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


class ResendableConnectionErrorRetryHandler(AsyncConnectionErrorRetryHandler):
    """``AsyncConnectionErrorRetryHandler`` limited to ``RESENDABLE_METHODS``."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if method_of(request.url) not in RESENDABLE_METHODS:
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


def install(client: AsyncWebClient, *, rate_limit_retries: int = RATE_LIMIT_RETRIES) -> None:
    """Give ``client`` exactly the two retry handlers above (idempotent): its own
    connection-error handler, which would re-send posts, is removed."""
    handlers: list[AsyncRetryHandler] = [
        ResendableConnectionErrorRetryHandler(),
        AsyncRateLimitErrorRetryHandler(max_retry_count=rate_limit_retries),
    ]
    client.retry_handlers = handlers
