"""How the two handlers' migration proxy ends (migration_proxy.py) authenticate each
other: TLS 1.2+ with the handler certificate on both sides, verified against the
kubevirt-py CA only, and the peer's CN must be the handler's."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Interface, ip_address
from pathlib import Path
from typing import Self

from shared.mtls import mutual_context

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

    # The migration network's address (the handler pod's `migration0`, handler/mignet.py):
    # the proxy listens there, advertises it and dials from it. None: the pod network.
    network: IPv4Interface | None = None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str],
        *,
        migration_network: Callable[[], IPv4Interface | None] = lambda: None,
    ) -> Self | None:
        """VIRT_HANDLER_MIGRATION_{CERT_DIR,HOST,ADVERTISE_HOST,BANDWIDTH_MIB}: the cert dir
        defaults to the actions endpoint's; the listening and advertised host to the
        migration network's address when `migration_network` finds one, else 0.0.0.0 and
        POD_IP. None (no proxy: both launchers must share one host) without certificates."""

        def env(name: str, default: str) -> str:
            return environ.get(ENV_PREFIX + name) or default

        actions_dir = environ.get("VIRT_HANDLER_ACTIONS_CERT_DIR") or str(DEFAULT_CERT_DIR)
        cert_dir = Path(env("CERT_DIR", actions_dir))
        if not all((cert_dir / f).is_file() for f in ("tls.crt", "tls.key", "ca.crt")):
            return None
        network = migration_network()
        mine = str(network.ip) if network is not None else None
        return cls(
            cert_dir=cert_dir,
            host=env("HOST", mine or "0.0.0.0"),
            advertise_host=env("ADVERTISE_HOST", mine or environ.get("POD_IP") or "127.0.0.1"),
            bandwidth_mib=int(env("BANDWIDTH_MIB", "0")),
            network=network,
        )

    def local_address(self, target: str) -> tuple[str, int] | None:
        """Where to dial `target` from: the migration network's address when the target is
        on that network (its traffic then leaves by `migration0`), else the system's pick."""
        if self.network is None:
            return None
        try:
            on_network = ip_address(target) in self.network.network
        except ValueError:  # a host name: not ours to place
            return None
        return (str(self.network.ip), 0) if on_network else None

    def server_context(self) -> ssl.SSLContext:
        return mutual_context(self.cert_dir, ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        """Node IPs are in no certificate: the CN is checked instead (shared/mtls.py)."""
        return mutual_context(self.cert_dir, ssl.PROTOCOL_TLS_CLIENT)
