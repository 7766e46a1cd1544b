"""Front-proxy authentication: the ConfigMap's settings, the client CN and X-Remote-* headers."""

from __future__ import annotations

import json

import pytest

from shared.mtls import certificate_cn
from tests.unit.virt_api.subresources.fakes import FRONT_PROXY_CN, PEM, request_header_config
from virt_api.subresources.authn import (
    RequestHeaderConfig,
    UserInfo,
    authenticate,
)
from virt_api.subresources.errors import SetupError, Unauthenticated


def test_config_from_the_configmap_kube_apiserver_writes() -> None:
    """Every requestheader key is read; lists are JSON as kube-apiserver stores them."""
    data = {
        "client-ca-file": "ignored",
        "requestheader-client-ca-file": PEM,
        "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
        "requestheader-username-headers": json.dumps(["X-Remote-User"]),
        "requestheader-uid-headers": json.dumps(["X-Remote-Uid"]),
        "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
        "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
    }
    assert RequestHeaderConfig.from_configmap(data) == RequestHeaderConfig(
        client_ca=PEM,
        allowed_names=("front-proxy-client",),
        username_headers=("X-Remote-User",),
        uid_headers=("X-Remote-Uid",),
        group_headers=("X-Remote-Group",),
        extra_prefixes=("X-Remote-Extra-",),
    )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({}, id="no-aggregation-layer"),
        pytest.param({"requestheader-client-ca-file": "not a pem"}, id="not-pem"),
        pytest.param(
            {"requestheader-client-ca-file": PEM, "requestheader-allowed-names": "[1]"},
            id="names-not-strings",
        ),
        pytest.param(
            {"requestheader-client-ca-file": PEM, "requestheader-group-headers": "{"},
            id="not-json",
        ),
    ],
)
def test_unusable_configmap_is_a_setup_error(data: dict[str, str]) -> None:
    """A ConfigMap without a usable requestheader CA or with malformed lists is refused."""
    with pytest.raises(SetupError):
        RequestHeaderConfig.from_configmap(data)


def test_user_groups_uid_and_extra_from_headers() -> None:
    """Groups and extra values may repeat; extra keys are unescaped and lower-cased."""
    headers = [
        ("x-remote-user", "system:serviceaccount:ns1:sa"),
        ("X-Remote-Uid", "u-1"),
        ("X-Remote-Group", "system:serviceaccounts"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-Authentication.kubernetes.io%2fpod-name", "pod-a"),
        ("X-Remote-Extra-Scopes", "a"),
        ("X-Remote-Extra-Scopes", "b"),
        ("Accept", "application/json"),
    ]
    config = request_header_config(uid_headers=("X-Remote-Uid",))
    user = authenticate(config, peer_cn=FRONT_PROXY_CN, headers=headers)
    assert user == UserInfo(
        name="system:serviceaccount:ns1:sa",
        uid="u-1",
        groups=("system:serviceaccounts", "system:authenticated"),
        extra={"authentication.kubernetes.io/pod-name": ("pod-a",), "scopes": ("a", "b")},
    )


@pytest.mark.parametrize(
    ("peer_cn", "headers", "allowed"),
    [
        pytest.param(None, [("X-Remote-User", "alice")], (FRONT_PROXY_CN,), id="no-client-cert"),
        pytest.param("mallory", [("X-Remote-User", "alice")], (FRONT_PROXY_CN,), id="wrong-cn"),
        pytest.param(FRONT_PROXY_CN, [("X-Remote-Group", "g")], (FRONT_PROXY_CN,), id="no-user"),
        pytest.param(FRONT_PROXY_CN, [("X-Remote-User", "")], (FRONT_PROXY_CN,), id="empty-user"),
    ],
)
def test_not_the_front_proxy_is_unauthenticated(
    peer_cn: str | None, headers: list[tuple[str, str]], allowed: tuple[str, ...]
) -> None:
    """Headers count only from an allowed front-proxy certificate that names a user."""
    config = request_header_config(allowed_names=allowed)
    with pytest.raises(Unauthenticated):
        authenticate(config, peer_cn=peer_cn, headers=headers)


def test_empty_allowed_names_accepts_any_cn_of_the_ca() -> None:
    """As in Kubernetes: no allowed names means any certificate the CA signed."""
    config = request_header_config(allowed_names=())
    user = authenticate(config, peer_cn="anything", headers=[("X-Remote-User", "bob")])
    assert user.name == "bob"


def test_common_name_of_a_peer_certificate() -> None:
    """The CN is read from getpeercert()'s subject; no certificate means None."""
    cert = {"subject": ((("organizationName", "o"),), (("commonName", "front-proxy-client"),))}
    assert certificate_cn(cert) == "front-proxy-client"
    assert certificate_cn(None) is None
    assert certificate_cn({}) is None
