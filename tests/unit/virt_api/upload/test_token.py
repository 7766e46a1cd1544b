"""Upload tokens: issued for one claim, refused when forged, altered, foreign or expired."""

from __future__ import annotations

import base64
import json

import pytest

from virt_api.upload.token import Grant, TokenError, TokenSigner

NOW = 1_800_000_000.0


def test_a_token_grants_its_namespace_and_claim_until_it_expires() -> None:
    """verify() gives back the namespace and claim issue() was asked for, 5 minutes on."""
    signer = TokenSigner(b"key")
    token = signer.issue(namespace="ns1", claim="disk", now=NOW)
    assert signer.verify(token, now=NOW + 299) == Grant(
        namespace="ns1", claim="disk", expires=int(NOW + 300)
    )


def test_an_expired_token_is_refused_saying_so() -> None:
    """Past its expiry the token is refused, telling the caller to ask for a new one."""
    signer = TokenSigner(b"key")
    token = signer.issue(namespace="ns1", claim="disk", now=NOW)
    with pytest.raises(TokenError, match="expired"):
        signer.verify(token, now=NOW + 300)


def test_a_token_of_another_key_is_refused() -> None:
    """A token signed with another key (another cluster, a guess) has an invalid signature."""
    token = TokenSigner(b"other").issue(namespace="ns1", claim="disk", now=NOW)
    with pytest.raises(TokenError, match="signature is invalid"):
        TokenSigner(b"key").verify(token, now=NOW)


def test_a_token_with_its_claim_changed_is_refused() -> None:
    """Rewriting the payload to name another claim breaks the signature."""
    signer = TokenSigner(b"key")
    body, _, mac = signer.issue(namespace="ns1", claim="disk", now=NOW).partition(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["pvc"] = "someone-elses"
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    with pytest.raises(TokenError, match="signature is invalid"):
        signer.verify(f"{forged}.{mac}", now=NOW)


@pytest.mark.parametrize("token", ["", "nodot", ".x", "x.", "!!!.???", "e30.e30"])
def test_garbage_is_refused_as_malformed_or_unsigned(token: str) -> None:
    """Anything not `<payload>.<signature>` of ours is refused with a TokenError."""
    with pytest.raises(TokenError):
        TokenSigner(b"key").verify(token, now=NOW)
