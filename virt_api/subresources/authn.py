"""Authenticating the front proxy, as every aggregated API server must.

kube-apiserver authenticates the user, then calls us with its front-proxy client
certificate and the user in X-Remote-* headers. We believe those headers only when the
connection's client certificate chains to the requestheader client CA (checked by the TLS
layer) and its CN is one of the allowed names — both published by kube-apiserver in the
ConfigMap kube-system/extension-apiserver-authentication, together with the header names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Self
from urllib.parse import unquote

from virt_api.subresources.errors import SetupError, Unauthenticated

AUTH_NAMESPACE = "kube-system"
AUTH_CONFIGMAP = "extension-apiserver-authentication"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeaderConfig:
    """The requestheader-* settings of kube-apiserver."""

    client_ca: str  # PEM bundle of the front proxy's CA
    allowed_names: tuple[str, ...] = ()  # empty: any certificate of the CA
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> Self:
        """Parse the ConfigMap's data; SetupError when no requestheader CA is set."""
        ca = data.get("requestheader-client-ca-file", "")
        if "BEGIN CERTIFICATE" not in ca:
            raise SetupError(
                f"{AUTH_NAMESPACE}/{AUTH_CONFIGMAP} has no requestheader-client-ca-file: "
                "is kube-apiserver's aggregation layer enabled (--requestheader-client-ca-file)?"
            )
        return cls(
            client_ca=ca,
            allowed_names=_json_list(data, "requestheader-allowed-names"),
            username_headers=_json_list(data, "requestheader-username-headers")
            or ("X-Remote-User",),
            uid_headers=_json_list(data, "requestheader-uid-headers"),
            group_headers=_json_list(data, "requestheader-group-headers") or ("X-Remote-Group",),
            extra_prefixes=_json_list(data, "requestheader-extra-headers-prefix")
            or ("X-Remote-Extra-",),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfo:
    """The user kube-apiserver authenticated, as a SubjectAccessReview names it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _json_list(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return ()
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise SetupError(f"{AUTH_CONFIGMAP}: {key} is not JSON: {raw[:100]!r}") from e
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SetupError(f"{AUTH_CONFIGMAP}: {key} is not a list of strings")
    return tuple(value)


def authenticate(
    config: RequestHeaderConfig, *, peer_cn: str | None, headers: Iterable[tuple[str, str]]
) -> UserInfo:
    """The user the front proxy vouches for; Unauthenticated when it is not the front proxy.

    `peer_cn` is the CN of the client certificate the TLS layer verified against the
    requestheader CA (None: no certificate). Header names compare case-insensitively;
    groups and extra values may repeat; extra keys are lower-cased and URL-unescaped, as
    kube-apiserver escapes them.
    """
    if peer_cn is None:
        raise Unauthenticated("a client certificate of the front proxy is required")
    if config.allowed_names and peer_cn not in config.allowed_names:
        raise Unauthenticated(f"client certificate CN {peer_cn!r} is not an allowed front proxy")
    items = [(k.lower(), v) for k, v in headers]
    name = _first(items, config.username_headers)
    if not name:
        raise Unauthenticated("the front proxy named no user")
    groups = tuple(v for h in config.group_headers for k, v in items if k == h.lower())
    return UserInfo(
        name=name,
        uid=_first(items, config.uid_headers),
        groups=groups,
        extra=_extra(items, config.extra_prefixes),
    )


def _first(items: list[tuple[str, str]], names: tuple[str, ...]) -> str:
    for header in names:
        for key, value in items:
            if key == header.lower() and value:
                return value
    return ""


def _extra(items: list[tuple[str, str]], prefixes: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    extra: dict[str, list[str]] = {}
    for prefix in (p.lower() for p in prefixes):
        for key, value in items:
            if key.startswith(prefix) and len(key) > len(prefix):
                extra.setdefault(unquote(key[len(prefix) :]).lower(), []).append(value)
    return {k: tuple(v) for k, v in extra.items()}
