"""Reading a daemon's /metrics as Prometheus does: HTTPS when the daemon has its serving
certificate mounted (production and real nodes, KubeVirt's way), plain HTTP when it has
none (process-mode harnesses); the certificate is not verified, as the ServiceMonitor's
insecureSkipVerify."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request


def metrics_text(
    address: str, port: int = 8443, *, scheme: str | None = None, timeout: float = 10
) -> str:
    """The exposition text at `scheme`://address:port/metrics; without a scheme, HTTPS
    and then, if the daemon does not speak TLS, HTTP."""
    if scheme is not None:
        return _get(f"{scheme}://{address}:{port}/metrics", timeout)
    try:
        return _get(f"https://{address}:{port}/metrics", timeout)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        return _get(f"http://{address}:{port}/metrics", timeout)


def _get(url: str, timeout: float) -> str:
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    context = unverified if url.startswith("https:") else None
    with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
        return str(resp.read().decode())
