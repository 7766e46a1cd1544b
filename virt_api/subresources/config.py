"""Configuration of the subresource API, from VIRT_CONTROLLER_SUBRESOURCES_* variables.

The certificates come from two mounted Secrets (scripts/gen-certs makes them):
`virt-api-certs` (serving, for the APIService) and `virt-controller-handler-client` (the
client certificate the handlers accept). Without the serving certificate the API is off
(`from_env` returns None), so a controller run without certificates still works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from virt_api.env import PrefixedEnv
from virt_api.subresources.errors import SetupError
from virt_api.subresources.tls import CertDir

ENV_PREFIX = "VIRT_CONTROLLER_SUBRESOURCES_"
DEFAULT_SERVING_DIR = Path("/etc/kubevirt-py/virt-api-certs")
DEFAULT_HANDLER_CLIENT_DIR = Path("/etc/kubevirt-py/virt-controller-handler-client")
DEFAULT_PORT = 8444
DEFAULT_HANDLER_SERVER_NAME = "virt-handler.kubevirt.svc"


@dataclass(frozen=True, slots=True, kw_only=True)
class SubresourceConfig:
    """Where to listen, which certificates, and the time budgets (seconds)."""

    serving: CertDir
    handler_client: CertDir
    host: str = "0.0.0.0"  # kube-apiserver reaches us through the Service's endpoints
    port: int = DEFAULT_PORT
    handler_server_name: str = DEFAULT_HANDLER_SERVER_NAME
    handler_timeout: float = 30.0  # > the launcher's medium tier (20 s)
    connect_timeout: float = 5.0
    review_timeout: float = 10.0
    write_timeout: float = 10.0  # one console frame to a slow peer
    heartbeat: float = 30.0  # websocket pings: how a dead console peer is noticed
    auth_refresh_interval: float = 300.0
    shutdown_timeout: float = 5.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self | None:
        """The config, or None when no serving certificate is mounted (the API is off).

        CERT_DIR, HANDLER_CLIENT_CERT_DIR, HOST, PORT and HANDLER_SERVER_NAME, each
        prefixed with VIRT_CONTROLLER_SUBRESOURCES_.
        """

        prefixed = PrefixedEnv(environ, ENV_PREFIX)
        env = prefixed.get

        serving = CertDir(Path(env("CERT_DIR", str(DEFAULT_SERVING_DIR))))
        if serving.missing(ca=False):
            return None
        client = CertDir(Path(env("HANDLER_CLIENT_CERT_DIR", str(DEFAULT_HANDLER_CLIENT_DIR))))
        if missing := client.missing(ca=True):
            raise SetupError(f"handler client certificate incomplete: missing {missing}")
        return cls(
            serving=serving,
            handler_client=client,
            host=env("HOST", "0.0.0.0"),
            port=prefixed.port(DEFAULT_PORT, error=SetupError),
            handler_server_name=env("HANDLER_SERVER_NAME", DEFAULT_HANDLER_SERVER_NAME),
        )
