"""Kubeconfig and in-cluster loading without kubernetes-asyncio's client: contexts, embedded
and file credentials, rotating token files, and refusals naming what is missing."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from shared.kube.connection import load_connection
from shared.kube.errors import ConfigError


def kubeconfig(path: Path, *, user: dict[str, object], current: str = "a") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": current,
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://198.18.0.1:6443/",
                                               "insecure-skip-tls-verify": True}},
                    {"name": "d", "cluster": {"server": "https://198.18.16.1:6443",
                                               "tls-server-name": "kubernetes"}},
                ],
                "users": [{"name": "u", "user": user}],
                "contexts": [
                    {"name": "a", "context": {"cluster": "c", "user": "u"}},
                    {"name": "b", "context": {"cluster": "d", "user": "u"}},
                ],
            }
        )
    )  # fmt: skip
    return path


async def test_current_context_token_and_insecure_server(tmp_path: Path) -> None:
    """The current context's server (trailing slash dropped), its TLS choice and the token."""
    conn = await load_connection(kubeconfig(tmp_path / "kc", user={"token": "t0k"}))
    assert conn.host == "https://198.18.0.1:6443"
    assert conn.verify is False
    assert await conn.bearer() == "Bearer t0k"


async def test_named_context_and_rotating_token_file(tmp_path: Path) -> None:
    """--context picks another cluster; a relative tokenFile is read next to the kubeconfig,
    again on every ask (a rotated token is seen)."""
    (tmp_path / "tok").write_text("one\n")
    conn = await load_connection(
        kubeconfig(tmp_path / "kc", user={"tokenFile": "tok"}), context="b"
    )
    assert (conn.host, conn.tls_server_name, conn.verify) == (
        "https://198.18.16.1:6443",
        "kubernetes",
        True,
    )
    assert await conn.bearer() == "Bearer one"
    (tmp_path / "tok").write_text("two")
    assert await conn.bearer() == "Bearer two"


async def test_embedded_client_certificate_is_loaded_into_tls(tmp_path: Path) -> None:
    """client-certificate-data / client-key-data reach the TLS context (bad PEM: ConfigError
    naming the TLS context), and no temporary copy of the key is left behind."""
    bad = base64.b64encode(b"not a certificate").decode()
    conn = await load_connection(
        kubeconfig(
            tmp_path / "kc",
            user={"client-certificate-data": bad, "client-key-data": bad},
        )
    )
    assert conn.cert_data == b"not a certificate"
    with pytest.raises(ConfigError, match="TLS context"):
        conn.ssl_context()
    assert not list(Path("/tmp").glob("kvpy-cert-*/tls.key"))


@pytest.mark.parametrize(
    ("user", "context", "message"),
    [
        pytest.param({"token": "t"}, "zz", "no context named 'zz'", id="unknown-context"),
        pytest.param({"token": "t"}, None, None, id="ok"),
    ],
)
async def test_unknown_context_is_a_config_error(
    tmp_path: Path, user: dict[str, object], context: str | None, message: str | None
) -> None:
    """A context the kubeconfig lacks is refused naming it."""
    path = kubeconfig(tmp_path / "kc", user=user)
    if message is None:
        assert (await load_connection(path, context=context)).host
        return
    with pytest.raises(ConfigError, match=message):
        await load_connection(path, context=context)
