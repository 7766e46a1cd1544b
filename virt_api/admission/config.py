"""Configuration of the admission webhooks, from VIRT_CONTROLLER_ADMISSION_* variables.

The webhooks are served with the subresource API's serving certificate (the `virt-api-certs`
Secret scripts/gen-certs makes, valid for the virt-api Service), on a port of their own
(the Service's `admission` port). Without that certificate admission is off (`from_env`
returns None): a controller run without certificates still works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from virt_api.admission.defaults import Defaults
from virt_api.env import PrefixedEnv
from virt_api.errors import ConfigError
from virt_api.subresources.tls import CertDir

ENV_PREFIX = "VIRT_CONTROLLER_ADMISSION_"
DEFAULT_CERT_DIR = Path("/etc/kubevirt-py/virt-api-certs")
DEFAULT_PORT = 8445


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionConfig:
    """Where to listen, which certificate, defaults and time budgets (seconds)."""

    serving: CertDir
    host: str = "0.0.0.0"  # kube-apiserver reaches us through the Service's endpoints
    port: int = DEFAULT_PORT
    defaults: Defaults = field(default_factory=Defaults)
    # Guests may run under TCG (the controller's --use-emulation): validation refuses what
    # TCG cannot run.
    emulation: bool = True
    lookup_timeout: float = 5.0  # kube-apiserver gives a webhook 10 s
    shutdown_timeout: float = 5.0
    max_body_bytes: int = 8 * 1024 * 1024  # object + oldObject, each up to 1.5 MiB in etcd

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self | None:
        """The config, or None when no serving certificate is mounted (admission is off).

        CERT_DIR, HOST, PORT and MACHINE_TYPE, each prefixed with VIRT_CONTROLLER_ADMISSION_.
        """

        prefixed = PrefixedEnv(environ, ENV_PREFIX)
        env = prefixed.get

        serving = CertDir(Path(env("CERT_DIR", str(DEFAULT_CERT_DIR))))
        if serving.missing(ca=False):
            return None
        return cls(
            serving=serving,
            host=env("HOST", "0.0.0.0"),
            port=prefixed.port(DEFAULT_PORT, error=ConfigError),
            defaults=Defaults(machine_type=env("MACHINE_TYPE", Defaults().machine_type)),
        )
