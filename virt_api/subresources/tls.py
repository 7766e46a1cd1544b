"""TLS contexts of the subresource API: serving kube-apiserver, calling the handlers.

- Serving: our certificate (SANs of the virt-api Service), client certificates optional
  but verified against the front proxy's CA when given (kubelet probes /healthz without
  one; everything else requires one, checked per request).
- Calling handlers: mutual TLS with the kubevirt-py CA; the handler's certificate must be
  valid for `virt-handler.<namespace>.svc` (its SANs carry `*.<namespace>.svc`), whatever
  node IP the endpoint names.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class CertDir:
    """A mounted kubernetes.io/tls Secret: tls.crt, tls.key and ca.crt."""

    path: Path

    @property
    def cert(self) -> Path:
        return self.path / "tls.crt"

    @property
    def key(self) -> Path:
        return self.path / "tls.key"

    @property
    def ca(self) -> Path:
        return self.path / "ca.crt"

    def missing(self, *, ca: bool) -> list[Path]:
        """Files that should be there and are not."""
        wanted = [self.cert, self.key, *([self.ca] if ca else [])]
        return [p for p in wanted if not p.is_file()]


def serving_context(serving: CertDir, *, client_ca_pem: str) -> ssl.SSLContext:
    """Server side: our certificate; optional client certificates from the front proxy's CA."""
    # Built by hand so that no system CA is ever trusted for client certificates: only
    # the front proxy's CA may vouch for X-Remote-* headers.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(serving.cert), str(serving.key))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.load_verify_locations(cadata=client_ca_pem)
    return ctx


def handler_client_context(client: CertDir) -> ssl.SSLContext:
    """Client side of the call to a handler: our client certificate, their CA."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies peer and hostname; no system CAs
    ctx.load_verify_locations(cafile=str(client.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(client.cert), str(client.key))
    return ctx
