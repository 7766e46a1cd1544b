"""How the two handlers' migration proxy ends (migration_proxy.py) authenticate each
other: TLS 1.2+ with the handler certificate on both sides, verified against the
kubevirt-py CA only, and the peer's CN must be the handler's."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

HANDLER_CN = "kubevirt-py-handler"
ENV_PREFIX = "VIRT_HANDLER_MIGRATION_"
DEFAULT_CERT_DIR = Path("/etc/kubevirt-py/virt-handler-certs")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    """cert_dir: the handler's kubernetes.io/tls Secret (tls.crt and tls.key, usable for
    serverAuth and clientAuth, and ca.crt)."""

    cert_dir: Path
    host: str = "0.0.0.0"
    advertise_host: str = "127.0.0.1"
    peer_cn: str = HANDLER_CN
    bandwidth_mib: int = 0  # per migration, MiB/s; 0: unlimited (libvirt's limit)
    connect_timeout: float = 10.0
    handshake_timeout: float = 10.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self | None:
        """VIRT_HANDLER_MIGRATION_{CERT_DIR,HOST,ADVERTISE_HOST,BANDWIDTH_MIB}: the cert dir
        defaults to the actions endpoint's, the advertised host to POD_IP. None (no proxy:
        both launchers must share one host) without certificates."""

        def env(name: str, default: str) -> str:
            return environ.get(ENV_PREFIX + name) or default

        actions_dir = environ.get("VIRT_HANDLER_ACTIONS_CERT_DIR") or str(DEFAULT_CERT_DIR)
        cert_dir = Path(env("CERT_DIR", actions_dir))
        if not all((cert_dir / f).is_file() for f in ("tls.crt", "tls.key", "ca.crt")):
            return None
        return cls(
            cert_dir=cert_dir,
            host=env("HOST", "0.0.0.0"),
            advertise_host=env("ADVERTISE_HOST", environ.get("POD_IP") or "127.0.0.1"),
            bandwidth_mib=int(env("BANDWIDTH_MIB", "0")),
        )

    def _context(self, purpose: int) -> ssl.SSLContext:
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_verify_locations(cafile=self.cert_dir / "ca.crt")  # only our CA
        ctx.load_cert_chain(self.cert_dir / "tls.crt", self.cert_dir / "tls.key")
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def server_context(self) -> ssl.SSLContext:
        return self._context(ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        ctx = self._context(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # node IPs are in no certificate: the CN is checked instead
        return ctx


def peer_cn(writer: asyncio.StreamWriter) -> str | None:
    cert = writer.get_extra_info("peercert")
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
