"""scripts/gen-certs: the CA, the three Secrets' files, SANs and usages, idempotence."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from tests.unit.virt_api.subresources.certs import Pki, gen_certs


def text(cert: Path) -> str:
    return subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def verifies(pki: Pki, cert: Path) -> bool:
    proc = subprocess.run(
        ["openssl", "verify", "-CAfile", str(pki.ca[0]), str(cert)], capture_output=True
    )
    return proc.returncode == 0


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pki, str]:
    return gen_certs(tmp_path_factory.mktemp("certs"), "--api-san", "IP:192.0.2.7")


def test_secrets_have_the_tls_layout(made: tuple[Pki, str]) -> None:
    """Each Secret directory holds tls.crt, tls.key (0600) and ca.crt, signed by the CA."""
    pki, _ = made
    for secret in (pki.api, pki.controller, pki.handler):
        assert sorted(p.name for p in secret.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
        assert (secret / "tls.key").stat().st_mode & 0o077 == 0
        assert (secret / "ca.crt").read_bytes() == pki.ca[0].read_bytes()
        assert verifies(pki, secret / "tls.crt")


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        pytest.param(
            "api",
            [
                "DNS:virt-api.kubevirt.svc,",
                "DNS:virt-api.kubevirt.svc.cluster.local",
                "IP Address:127.0.0.1",
                "IP Address:192.0.2.7",
                "TLS Web Server Authentication",
            ],
            id="virt-api",
        ),
        pytest.param(
            "handler",
            ["DNS:virt-handler.kubevirt.svc,", "IP Address:127.0.0.1", "TLS Web Server Auth"],
            id="handler",
        ),
        pytest.param(
            "controller",
            ["Subject: CN = kubevirt-py-controller", "TLS Web Client Authentication"],
            id="controller-client",
        ),
    ],
)
def test_names_and_usages(made: tuple[Pki, str], which: str, expected: list[str]) -> None:
    """SANs cover the Service names (and 127.0.0.1); usages match each role."""
    pki, _ = made
    dump = text(getattr(pki, which) / "tls.crt")
    for needle in expected:
        assert needle in dump
    assert "*" not in dump  # no wildcard: a handler's key must not pass as virt-api


def test_ca_bundle_is_printed_last(made: tuple[Pki, str]) -> None:
    """The last line printed is the base64 CA for APIService.spec.caBundle (also as a patch)."""
    pki, bundle = made
    assert base64.b64decode(bundle) == pki.ca[0].read_bytes()
    assert f"caBundle: {bundle}" in (pki.root / "apiservice-cabundle-patch.yaml").read_text()


def test_rerun_keeps_the_ca_and_force_replaces_it(tmp_path: Path) -> None:
    """Re-running is idempotent; --force makes a new CA (old certificates stop verifying)."""
    pki, first = gen_certs(tmp_path)
    _, again = gen_certs(tmp_path)
    assert again == first
    kept = tmp_path / "old-handler.crt"
    kept.write_bytes((pki.handler / "tls.crt").read_bytes())
    _, forced = gen_certs(tmp_path, "--force")
    assert forced != first
    assert verifies(pki, pki.handler / "tls.crt")
    assert not verifies(pki, kept)
