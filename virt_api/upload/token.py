"""Upload tokens: what an UploadTokenRequest answers and the upload proxy checks.

    signer = TokenSigner(key)
    token = signer.issue(namespace="ns", claim="disk", now=time.time())
    grant = signer.verify(token, now=time.time())      # TokenError: why it is refused

A token is `<payload>.<mac>`, both base64url: the payload is JSON naming the namespace, the
claim and the expiry (`ttl` seconds after issue, 5 minutes by default as CDI's), the MAC an
HMAC-SHA256 over the payload with a key every virt-api replica shares (derived from the
serving key of the virt-api-certs Secret, so any replica verifies what another issued).
A token grants one thing: an upload into that claim until it expires.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Self

TOKEN_TTL = 300.0
KEY_CONTEXT = b"kubevirt-py upload token v1"


class TokenError(ValueError):
    """The token is malformed, forged or expired (the message says which)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """What a valid token allows: an upload into namespace/claim."""

    namespace: str
    claim: str
    expires: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Issues and verifies upload tokens with one secret key."""

    def __init__(self, key: bytes, *, ttl: float = TOKEN_TTL) -> None:
        if not key:
            raise ValueError("the upload token key is empty")
        self._key = hmac.new(key, KEY_CONTEXT, hashlib.sha256).digest()
        self._ttl = ttl

    @classmethod
    def from_key_file(cls, path: Path, *, ttl: float = TOKEN_TTL) -> Self:
        """The signer whose key derives from a (serving) private key file."""
        return cls(path.read_bytes(), ttl=ttl)

    def issue(self, *, namespace: str, claim: str, now: float) -> str:
        """A token for an upload into namespace/claim, valid `ttl` seconds from `now`."""
        payload = {"ns": namespace, "pvc": claim, "exp": int(now + self._ttl)}
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{_b64(self._mac(body))}"

    def verify(self, token: str, *, now: float) -> Grant:
        """The grant of a valid token; TokenError when it is not one of ours or expired."""
        body, dot, mac = token.strip().partition(".")
        if not dot or not body or not mac:
            raise TokenError("the upload token is malformed (want <payload>.<signature>)")
        try:
            given = _unb64(mac)
            payload = json.loads(_unb64(body))
        except (binascii.Error, ValueError):
            raise TokenError("the upload token is malformed (not base64url JSON)") from None
        if not hmac.compare_digest(given, self._mac(body)):
            raise TokenError("the upload token's signature is invalid")
        try:
            grant = Grant(
                namespace=str(payload["ns"]), claim=str(payload["pvc"]), expires=payload["exp"]
            )
        except (KeyError, TypeError) as e:
            raise TokenError(f"the upload token is malformed: missing {e}") from None
        if not isinstance(grant.expires, int) or grant.expires <= now:
            raise TokenError("the upload token has expired: ask for a new UploadTokenRequest")
        return grant

    def _mac(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode(), hashlib.sha256).digest()
