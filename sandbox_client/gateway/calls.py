"""Per-call proxy credentials: which call of a session a request really comes from (§13).

Each command a sandbox runs for a ``tool_use`` gets its own proxy URL,
``http://<tool_use_id>:<credential>@gateway``, in that command's environment only; HTTP
clients send it as ``Proxy-Authorization: Basic …`` (RFC 9110 §11.7.1, RFC 7617). The
credential is an HMAC of the session and the call under a key only the gateway's host holds,
so it cannot be guessed or made up for another call, and the gateway checks it without a
lookup. A request without one comes from no call (a process started with the sandbox's
session-wide proxy variables); a request whose credential does not match is refused 407.

What a credential proves is only which call's environment the request came from; what that
call may do (a change only while it is an approved call in flight) is the gateway's
``ApprovalCheck``. Keeping the credential out of other processes' reach is the sandbox's part
(the local server puts each command in its own Landlock domain: docs/architecture.md §13).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import quote

import h11
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

KEY_INFO = b"warroom per-call proxy credential v1"
CREDENTIAL_CHARS = 43
"""Length of a credential: 256 bits of HMAC-SHA256 in unpadded base64url."""
TOKEN_INFO = b"warroom session token v1\0"
TOKEN_TAG_BYTES = 16
LEGACY_TOKEN_CHARS = 43
"""A session token as the database issues it (``memory_store.EgressTokens.issue``: 256
random bits in unpadded base64url), and as tokens were before they carried a tag."""
SIGNED_TOKEN_CHARS = LEGACY_TOKEN_CHARS + 22
"""A token with its tag: 128 bits of HMAC-SHA256 in unpadded base64url after the raw part."""


@dataclass(frozen=True)
class ProxyAuthorization:
    """What a ``Proxy-Authorization: Basic`` header carried: ``user`` and ``password``."""

    user: str
    password: str


class BadProxyAuthorization(ValueError):
    """A ``Proxy-Authorization`` header that is not ``Basic`` base64 of ``user:password``."""


@dataclass(frozen=True, repr=False)
class CallCredentials:
    """Issues and checks per-call proxy credentials under one secret ``key`` (≥ 32 bytes)."""

    key: bytes

    def __post_init__(self) -> None:
        if len(self.key) < 32:
            raise ValueError("a call-credential key needs at least 32 bytes")

    @classmethod
    def generate(cls) -> CallCredentials:
        """A fresh random key: credentials are then checked only by this process."""
        return cls(secrets.token_bytes(32))

    @classmethod
    def derived_from(cls, ca_key: ec.EllipticCurvePrivateKey) -> CallCredentials:
        """A key derived from the gateway CA's private key, so that every worker and the remote
        gateway of one deployment (which share that CA) check each other's credentials. Who
        holds the CA key can already impersonate every upstream, so no new secret is shared."""
        der = ca_key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cls(hmac.new(der, KEY_INFO, hashlib.sha256).digest())

    def issue(self, session_id: str, tool_use_id: str) -> str:
        """The credential of call ``tool_use_id`` of ``session_id`` (``CREDENTIAL_CHARS`` long,
        URL-safe, the same every time it is asked: a redone call gets the one it had)."""
        message = f"{session_id}\0{tool_use_id}".encode()
        digest = hmac.new(self.key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def verify(self, session_id: str, tool_use_id: str, credential: str) -> bool:
        """Whether ``credential`` is the one ``issue`` gives that call (constant time)."""
        if not tool_use_id or len(credential) != CREDENTIAL_CHARS:
            return False
        expected = self.issue(session_id, tool_use_id)
        return hmac.compare_digest(expected.encode(), credential.encode("utf-8", "replace"))

    def signed_token(self, raw: str) -> str:
        """A session token for a remote sandbox's proxy URL: ``raw`` (random,
        ``LEGACY_TOKEN_CHARS`` long) and a tag under this key, so the gateway knows a
        token it issued from a guess without a look-up (``tokens``). The database keeps
        the hash of the whole token, so a gateway of an earlier release, which looks up
        whatever it is sent, finds it too.

        Raises:
            ValueError: ``raw`` is not ``LEGACY_TOKEN_CHARS`` URL-safe characters.
        """
        if len(raw) != LEGACY_TOKEN_CHARS or not raw.isascii() or "." in raw:
            raise ValueError(f"a session token has {LEGACY_TOKEN_CHARS} URL-safe characters")
        return raw + self._token_tag(raw)

    def token_is_ours(self, token: str) -> bool:
        """Whether ``token`` is one ``signed_token`` made under this key (constant time in
        the tag)."""
        if len(token) != SIGNED_TOKEN_CHARS or not token.isascii():
            return False
        raw, tag = token[:LEGACY_TOKEN_CHARS], token[LEGACY_TOKEN_CHARS:]
        return hmac.compare_digest(self._token_tag(raw).encode(), tag.encode())

    def _token_tag(self, raw: str) -> str:
        digest = hmac.new(self.key, TOKEN_INFO + raw.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:TOKEN_TAG_BYTES]).decode("ascii").rstrip("=")

    def userinfo(self, session_id: str, tool_use_id: str, password_prefix: str = "") -> str:
        """``<tool_use_id>:<prefix><credential>`` percent-encoded for a proxy URL.

        >>> CallCredentials(bytes(32)).userinfo("s", "toolu_1")[:8]
        'toolu_1:'
        """
        credential = password_prefix + self.issue(session_id, tool_use_id)
        return f"{quote(tool_use_id, safe='')}:{quote(credential, safe='')}"


def proxy_authorization(request: h11.Request) -> ProxyAuthorization | None:
    """The ``Proxy-Authorization`` a request carries (None: no such header).

    Raises:
        BadProxyAuthorization: the header is not ``Basic`` with base64 of ``user:password``.

    >>> proxy_authorization(h11.Request(method="GET", target="http://h/", headers=[
    ...     ("Host", "h"), ("Proxy-Authorization", "Basic dTpwOnE=")]))
    ProxyAuthorization(user='u', password='p:q')
    """
    values = [v for k, v in request.headers if k == b"proxy-authorization"]
    if not values:
        return None
    if len(values) > 1:
        raise BadProxyAuthorization("more than one Proxy-Authorization header")
    scheme, _, encoded = values[0].decode("latin-1").strip().partition(" ")
    if scheme.lower() != "basic":
        raise BadProxyAuthorization(f"the {scheme or 'empty'} scheme (only Basic is known)")
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        raise BadProxyAuthorization("Basic credentials that are not base64 of UTF-8") from exc
    user, colon, password = text.partition(":")
    if not colon:
        raise BadProxyAuthorization("Basic credentials without a ':'")
    return ProxyAuthorization(user, password)
