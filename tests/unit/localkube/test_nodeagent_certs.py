"""The node agent's kubeconfig loader keeps the embedded certificate and key beside the
kubeconfig, never in /tmp (a SIGKILLed agent skips the loader's clean-up at exit)."""

from __future__ import annotations

import base64
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.config import kube_config

from localkube.nodeagent.kube import connect


def _kubeconfig(tmp: Path) -> Path:
    key, crt = tmp / "k.pem", tmp / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-subj", "/CN=t", "-days", "1", "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    path = tmp / "kubeconfig" / "node1.kubeconfig"
    path.parent.mkdir()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:1",
                            "certificate-authority-data": b64(crt),
                        },
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {"client-certificate-data": b64(crt), "client-key-data": b64(key)},
                    }
                ],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


async def test_embedded_certificates_stay_beside_the_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is written to the temp dir; the certs dir holds one set, emptied when the next
    agent process connects."""
    kubeconfig = _kubeconfig(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    certs = kubeconfig.with_suffix(".certs")
    async with connect(kubeconfig):
        first = sorted(p.name for p in certs.iterdir())
    (certs / "stale").write_text("left by a killed agent")
    monkeypatch.setattr(kube_config, "_temp_files", {})  # as in the next agent process
    async with connect(kubeconfig):
        second = sorted(p.name for p in certs.iterdir())
    assert list(scratch.iterdir()) == []
    assert len(first) == 2  # the certificate (here also the CA: one file) and the key
    assert "stale" not in second
    assert certs.stat().st_mode & 0o777 == 0o700
