"""Certificates, keys and kubeconfigs of the local cluster, made with the openssl CLI.

Everything is created once in the state directory and reused by later ``up`` runs;
a file that exists is never regenerated, so kubeconfigs stay valid across restarts.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from localkube.procs import run_cmd

# Process-mode clusters' Service range: virtual (nothing routes there), inside 198.18.0.0/15.
# Real-node clusters take theirs from their address block (localkube/realnode/netplan.py).
SERVICE_CIDR = "198.19.255.0/24"
SERVICE_IP = "198.19.255.1"
APISERVER_SANS = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
_DAYS = "3650"


@dataclass(frozen=True, slots=True, kw_only=True)
class CertSpec:
    """One leaf certificate: subject, usage and SANs."""

    name: str
    cn: str
    orgs: tuple[str, ...] = ()
    server: bool = False
    sans: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths to the cluster's CAs and keys inside the state directory."""

    dir: Path

    def crt(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    async def ensure_ca(self, name: str, cn: str) -> None:
        if self.crt(name).exists() and self.key(name).exists():
            return
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        opts: dict[str, str | Path] = {
            "-days": _DAYS,
            "-subj": f"/CN={cn}",
            "-keyout": self.key(name),
            "-out": self.crt(name),
        }
        await _openssl(
            ["req", "-x509", "-nodes", *_EC],
            opts,
            [
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            ],
        )
        os.chmod(self.key(name), 0o600)

    async def ensure_cert(self, spec: CertSpec, *, ca: str) -> None:
        """Create ``spec.name``.crt/.key signed by CA ``ca`` unless both exist."""
        crt, key = self.crt(spec.name), self.key(spec.name)
        if crt.exists() and key.exists():
            return
        subject = "".join(f"/O={o}" for o in spec.orgs) + f"/CN={spec.cn}"
        csr, ext = self.dir / f"{spec.name}.csr", self.dir / f"{spec.name}.ext"
        ext.write_text(_extensions(spec))
        await _openssl(
            ["req", "-new", "-nodes", *_EC], {"-subj": subject, "-keyout": key, "-out": csr}
        )
        await _openssl(
            ["x509", "-req"],
            {
                "-in": csr,
                "-CA": self.crt(ca),
                "-CAkey": self.key(ca),
                "-set_serial": f"0x{secrets.token_hex(16)}",
                "-days": _DAYS,
                "-extfile": ext,
                "-out": crt,
            },
        )
        os.chmod(key, 0o600)
        csr.unlink()
        ext.unlink()

    async def ensure_service_account_key(self) -> None:
        if self.sa_key.exists() and self.sa_pub.exists():
            return
        await _openssl(
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
            {"-out": self.sa_key},
        )
        os.chmod(self.sa_key, 0o600)
        await _openssl(["pkey", "-pubout"], {"-in": self.sa_key, "-out": self.sa_pub})


async def _openssl(
    head: list[str], options: dict[str, str | Path], tail: Sequence[str] = ()
) -> None:
    """Run ``openssl <head> <-opt value>... <tail>``."""
    argv = ["openssl", *head]
    for flag, value in options.items():
        argv += [flag, str(value)]
    await run_cmd([*argv, *tail])


def _extensions(spec: CertSpec) -> str:
    usage = "serverAuth" if spec.server else "clientAuth"
    lines = [
        "basicConstraints=CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if spec.sans:
        lines.append("subjectAltName=" + ",".join(spec.sans))
    return "\n".join(lines) + "\n"


def control_plane_certs(ips: Sequence[str]) -> list[CertSpec]:
    """The leaf certificates signed by the cluster CA; ``ips``: kube-apiserver's addresses
    besides loopback (its Service IP, the real nodes' gateway)."""
    sans = (*APISERVER_SANS, *(f"IP:{ip}" for ip in ips))
    return [
        CertSpec(name="apiserver", cn="kube-apiserver", server=True, sans=sans),
        CertSpec(name="admin", cn="kubernetes-admin", orgs=("system:masters",)),
        CertSpec(name="controller-manager", cn="system:kube-controller-manager"),
        CertSpec(name="scheduler", cn="system:kube-scheduler"),
    ]


def node_cert(node: str) -> CertSpec:
    """A node agent authenticates like a kubelet: system:node:<name> in system:nodes."""
    return CertSpec(name=f"node-{node}", cn=f"system:node:{node}", orgs=("system:nodes",))


async def ensure_pki(
    pki: Pki,
    nodes: tuple[str, ...],
    *,
    ips: Sequence[str] = (SERVICE_IP,),
    extra: Sequence[CertSpec] = (),
) -> None:
    """All CAs, certificates and keys the cluster needs (idempotent)."""
    await pki.ensure_ca("ca", "kubevirt-py-localkube-ca")
    await pki.ensure_ca("front-proxy-ca", "kubevirt-py-localkube-front-proxy-ca")
    await pki.ensure_service_account_key()
    for spec in [*control_plane_certs(ips), *extra]:
        await pki.ensure_cert(spec, ca="ca")
    await pki.ensure_cert(
        CertSpec(name="front-proxy-client", cn="front-proxy-client"), ca="front-proxy-ca"
    )
    for node in nodes:
        await pki.ensure_cert(node_cert(node), ca="ca")


def write_kubeconfig(path: Path, *, server: str, pki: Pki, user: str) -> None:
    """A self-contained kubeconfig (certificates embedded) for client cert ``user``."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "localkube",
                "cluster": {"server": server, "certificate-authority-data": b64(pki.crt("ca"))},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(pki.crt(user)),
                    "client-key-data": b64(pki.key(user)),
                },
            }
        ],
        "contexts": [{"name": "localkube", "context": {"cluster": "localkube", "user": user}}],
        "current-context": "localkube",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
