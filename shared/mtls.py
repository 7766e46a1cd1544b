"""Mutual TLS between kubevirt-py's own ends (the handlers' migration proxy, the
controllers' synchronization endpoint): contexts that trust only the kubevirt-py CA and
require the peer's certificate; and the subject CN a verified peer showed, which these
ends check instead of a host name (they dial pod and node IPs that no certificate names).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FILES = ("tls.crt", "tls.key", "ca.crt")  # a kubernetes.io/tls Secret with its CA


def mutual_context(cert_dir: Path, protocol: int) -> ssl.SSLContext:
    """TLS 1.2+, ``cert_dir``'s certificate as ours, only its ``ca.crt`` trusted, a peer
    certificate required; no host name check (the caller checks the CN)."""
    ctx = ssl.SSLContext(protocol)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cafile=cert_dir / "ca.crt")
    ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def certificate_cn(peercert: Mapping[str, Any] | None) -> str | None:
    """The subject CN of a verified peer certificate (``SSLSocket.getpeercert()``)."""
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def peer_cn(writer: asyncio.StreamWriter) -> str | None:
    """The CN of the TLS peer's verified certificate on an asyncio stream."""
    return certificate_cn(writer.get_extra_info("peercert"))
