"""A rolling upgrade that brings tagged session tokens (red team): a worker of this release
puts a tagged token (65 characters) in a remote sandbox's proxy URL; a ``warroom gateway``
of the previous release, still running, looks up the URL's token as it is
(``EgressTokens.owner(token)``): the database keeps the hash of the whole token."""

from __future__ import annotations

from memory_store import Database, EgressTokens, TokenOwner
from sandbox_client.gateway import CallCredentials

from .test_egress import live_session


async def test_a_token_this_release_issues_works_at_a_gateway_of_the_previous_release(
    file_db: Database,
) -> None:
    # Given a running session whose token a worker of this release issued (tagged)
    await live_session(file_db, "s-up")
    tokens = EgressTokens(file_db)
    sent = await tokens.issue("s-up", "C-1", sign=CallCredentials.generate().signed_token)
    # When a gateway of the previous release (upgraded after the workers, or not yet)
    # looks the URL's token up, as it did: the whole token, one query
    owner = await tokens.owner(sent)
    # Then the session is found, so remote sandboxes keep working through the deploy,
    # whichever of workers and gateway is upgraded first
    assert owner == TokenOwner("s-up", "C-1")
