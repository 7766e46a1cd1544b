"""Where the API server is and how to authenticate to it, read from a kubeconfig or the
in-cluster service account without importing kubernetes-asyncio's client (its models take
≈ 0.2 s to import, most of a CLI verb's start).

    conn = await load_connection(kubeconfig, context=None)   # kubeconfig None: in-cluster

Handled here: server, tls-server-name, proxy-url, certificate-authority(-data),
insecure-skip-tls-verify, client-certificate(-data)/client-key(-data), token, tokenFile
(re-read as it rotates), and the in-cluster service account. A user with `exec`,
`auth-provider` or basic auth is loaded by kubernetes-asyncio's loader (imported only then),
whose token hook the connection then calls.
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shared.kube.errors import ConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DELEGATED_USER_KEYS = ("exec", "auth-provider", "username", "password")

TokenSource = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class InClusterPaths:
    """Where the service account's token and CA live (overridable for tests)."""

    token: Path = SERVICE_ACCOUNT_DIR / "token"
    ca_cert: Path = SERVICE_ACCOUNT_DIR / "ca.crt"


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """The API server's address and the credentials to present; `ssl_context()` builds TLS."""

    host: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM, when the kubeconfig embeds it
    key_data: bytes | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    token: str | None = None
    # Tokens that rotate (a token file, exec plugins): asked again every refresh period.
    token_source: TokenSource | None = None

    async def bearer(self) -> str | None:
        """The Authorization header's value, or None."""
        if self.token_source is not None:
            return await self.token_source()
        return f"Bearer {self.token}" if self.token else None

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context: the CA (file or data), the client certificate, verification."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
            with _cert_files(self) as (cert, key):
                if cert:
                    ctx.load_cert_chain(cert, keyfile=key)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise ConfigError(f"cannot build the TLS context: {e}") from e
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT  # kubeadm-era CAs lack key usage bits
        return ctx


@contextlib.contextmanager
def _cert_files(conn: Connection) -> Iterator[tuple[str | None, str | None]]:
    """Paths of the client certificate and key; embedded data goes to a private temp dir
    that is removed once the context has loaded them."""
    if conn.cert_data is None:
        yield conn.cert_file, conn.key_file
        return
    with tempfile.TemporaryDirectory(prefix="kvpy-cert-") as tmp:
        cert = Path(tmp, "tls.crt")
        cert.write_bytes(conn.cert_data)
        key = Path(tmp, "tls.key")
        key.write_bytes(conn.key_data or b"")
        key.chmod(0o600)
        yield str(cert), str(key) if conn.key_data else conn.key_file


async def load_connection(
    kubeconfig: Path | None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    in_cluster: InClusterPaths | None = None,
) -> Connection:
    """The connection a kubeconfig describes, or the in-cluster one when it is None."""
    if kubeconfig is None:
        return _in_cluster(dict(os.environ if environ is None else environ), in_cluster)
    try:
        raw = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot load Kubernetes client config from {kubeconfig}: {e}") from e
    parsed = parse_connection(raw, context=context, path=kubeconfig)
    return parsed if parsed is not None else await _delegated(kubeconfig, context)


def parse_connection(
    raw: Mapping[str, Any], *, context: str | None, path: Path
) -> Connection | None:
    """The connection of an already parsed kubeconfig (read from `path`), without awaiting;
    None when its user needs kubernetes-asyncio's loader (exec, auth-provider, basic auth)."""
    cluster, user = _pick(raw, context, path)
    if any(k in user for k in DELEGATED_USER_KEYS):
        return None
    return _from_kubeconfig(cluster, user, base=path.parent)


def _pick(
    raw: Mapping[str, Any], context: str | None, path: Path
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    def named(section: str, name: str | None, inner: str) -> Mapping[str, Any]:
        for entry in raw.get(section) or ():
            if isinstance(entry, Mapping) and entry.get("name") == name:
                value = entry.get(inner)
                return value if isinstance(value, Mapping) else {}
        raise ConfigError(f"{path}: no {inner} named {name!r} in {section}")

    ctx = named("contexts", context or raw.get("current-context"), "context")
    return named("clusters", ctx.get("cluster"), "cluster"), named("users", ctx.get("user"), "user")


def _from_kubeconfig(
    cluster: Mapping[str, Any], user: Mapping[str, Any], *, base: Path
) -> Connection:
    def path(value: Any) -> str | None:
        return str(base / value) if isinstance(value, str) and value else None

    def data(section: Mapping[str, Any], key: str) -> bytes | None:
        value = section.get(key)
        return base64.b64decode(value) if isinstance(value, str) and value else None

    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise ConfigError("the kubeconfig's cluster has no server")
    ca_data = data(cluster, "certificate-authority-data")
    token_file = path(user.get("tokenFile"))
    token = user.get("token") if isinstance(user.get("token"), str) else None
    return Connection(
        host=server.rstrip("/"),
        ca_file=path(cluster.get("certificate-authority")),
        ca_data=ca_data.decode() if ca_data else None,
        cert_file=path(user.get("client-certificate")),
        key_file=path(user.get("client-key")),
        cert_data=data(user, "client-certificate-data"),
        key_data=data(user, "client-key-data"),
        verify=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        token=token,
        token_source=_file_token(Path(token_file)) if token_file and not token else None,
    )


def _in_cluster(environ: Mapping[str, str], paths: InClusterPaths | None) -> Connection:
    paths = paths or InClusterPaths()
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "cannot load Kubernetes client config from in-cluster service account: "
            "KUBERNETES_SERVICE_HOST/PORT are not set"
        )
    if not paths.token.is_file() or not paths.ca_cert.is_file():
        raise ConfigError(
            "cannot load Kubernetes client config from in-cluster service account: "
            f"{paths.token} or {paths.ca_cert} is missing"
        )
    address = f"[{host}]" if ":" in host else host
    return Connection(
        host=f"https://{address}:{port}",
        ca_file=str(paths.ca_cert),
        token_source=_file_token(paths.token),
    )


def _file_token(path: Path) -> TokenSource:
    """Re-reads a (rotating) token file each time it is asked."""

    async def token() -> str | None:
        try:
            value = path.read_text().strip()
        except OSError as e:
            raise ConfigError(f"cannot read the token file {path}: {e}") from e
        return f"Bearer {value}" if value else None

    return token


async def _delegated(kubeconfig: Path, context: str | None) -> Connection:
    """kubernetes-asyncio's loader for exec plugins, auth providers and basic auth."""
    from kubernetes_asyncio import client, config  # noqa: PLC0415 - only for these users

    cfg = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=str(kubeconfig), context=context, client_configuration=cfg
        )
    except (config.ConfigException, OSError) as e:
        raise ConfigError(f"cannot load Kubernetes client config from {kubeconfig}: {e}") from e

    async def token() -> str | None:
        value = await cfg.get_api_key_with_prefix("BearerToken")
        return str(value) if value else None

    return Connection(
        host=str(cfg.host).rstrip("/"),
        ca_file=cfg.ssl_ca_cert,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        verify=bool(cfg.verify_ssl),
        tls_server_name=cfg.tls_server_name or None,
        proxy=cfg.proxy or None,
        token_source=token,
    )
