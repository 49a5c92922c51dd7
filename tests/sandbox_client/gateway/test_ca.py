"""The gateway's certificate authority: host contexts are cached, within a bound."""

from __future__ import annotations

from sandbox_client.gateway.ca import CertificateAuthority


def test_a_host_context_is_minted_once_and_reused() -> None:
    authority = CertificateAuthority.create()

    first = authority.server_context("api.example.com")

    assert authority.server_context("API.example.com") is first


def test_a_sandbox_naming_new_hosts_without_end_does_not_grow_the_cache() -> None:
    # Given a CA that keeps three host contexts (every CONNECT is terminated, blocked too)
    authority = CertificateAuthority.create()
    authority.max_contexts = 3
    kept = authority.server_context("a.example.com")
    for name in ("b.example.com", "c.example.com"):
        authority.server_context(name)
    # When the least recent of them is used again and a fourth and fifth host are named
    assert authority.server_context("a.example.com") is kept
    for name in ("d.example.com", "e.example.com"):
        authority.server_context(name)
    # Then three are kept, the one used lately among them, and an evicted one is minted anew
    assert len(authority._contexts) == 3
    assert authority.server_context("a.example.com") is kept
    assert authority.server_context("b.example.com") is not None
    assert "c.example.com" not in authority._contexts
