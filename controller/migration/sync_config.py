"""The synchronization endpoint's settings (KubeVirt's virt-synchronization-controller):
where the leader controller listens, which addresses it advertises, its certificate.

The certificate (Secret virt-synchronization-controller-certs: tls.crt, tls.key, ca.crt,
made by scripts/lib/kvcerts.py, CN `SYNC_CN`, usable for serverAuth and clientAuth) is
both sides' identity: two clusters whose certificates the same kubevirt-py CA signed trust
each other. Peers dial pod IPs, which no certificate names, so the CN is checked instead of
the host name, as the handlers' migration proxy does.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

from shared.mtls import FILES, mutual_context
from shared.wire.sync import SYNC_CN, SYNC_PORT


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncConfig:
    """cert_dir None: no endpoint (and no dialling another cluster)."""

    cert_dir: Path | None = None
    host: str = "0.0.0.0"
    port: int = SYNC_PORT
    # The address other clusters dial (the pod IP): status.synchronizationAddresses.
    advertise_host: str = ""
    peer_cn: str = SYNC_CN
    timeout: float = 10.0  # each exchange: connect, handshake, request and answer

    @classmethod
    def from_flags(cls, *, cert_dir: str, port: str, advertise_host: str) -> SyncConfig:
        """From the controller's flags; no endpoint unless the cert dir has all three files
        (the Secret's volume is optional: a cluster without it runs one-cluster pairing)."""
        found = Path(cert_dir) if cert_dir else None
        if found is not None and not all((found / f).is_file() for f in FILES):
            found = None
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError(f"--sync-port must be a port number, not {port}")
        return cls(cert_dir=found, port=number, advertise_host=advertise_host)

    @property
    def enabled(self) -> bool:
        """A certificate to serve and dial with."""
        return self.cert_dir is not None

    def addresses(self) -> tuple[str, ...]:
        """What a peer may dial: "host:port" ("[v6]:port"), none without an endpoint."""
        if not self.enabled or not self.advertise_host:
            return ()
        host = self.advertise_host
        try:
            if ip_address(host).version == 6:
                host = f"[{host}]"
        except ValueError:
            pass
        return (f"{host}:{self.port}",)

    def _context(self, protocol: int) -> ssl.SSLContext:
        if self.cert_dir is None:
            raise ValueError("no synchronization certificate")
        return mutual_context(self.cert_dir, protocol)  # pod IPs: the CN is checked

    def server_context(self) -> ssl.SSLContext:
        """Mutual TLS: a client certificate signed by the CA is required."""
        return self._context(ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        """The peer's certificate must be signed by the CA."""
        return self._context(ssl.PROTOCOL_TLS_CLIENT)


def split_url(url: str) -> tuple[str, int]:
    """A connectURL's host and port ("[v6]:port" unbracketed); admission checked its form."""
    host, _, port = url.rpartition(":")
    return host.strip("[]"), int(port)
