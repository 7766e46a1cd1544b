"""Who and where: the kubeconfig, context and namespace flags kubectl users expect."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from shared.kube import ClientConfig, KubeClient, Registry
from shared.kube.ratelimit import RateLimit


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    kubeconfig: Path
    context: str | None
    namespace: str

    def client_config(self) -> ClientConfig:
        return ClientConfig(
            kubeconfig=self.kubeconfig,
            context=self.context,
            rate_limit=RateLimit(qps=50, burst=100),
            user_agent="virtctl-py",
        )

    async def connect(self) -> KubeClient:
        return await KubeClient.connect(self.client_config(), registry=Registry())


def resolve(*, kubeconfig: str | None, context: str | None, namespace: str | None) -> Target:
    """kubeconfig: flag, else $KUBECONFIG, else ~/.kube/config; namespace: flag, else context's."""
    path = Path(
        kubeconfig
        or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        or Path.home() / ".kube" / "config"
    )
    return Target(
        kubeconfig=path, context=context, namespace=namespace or _context_namespace(path, context)
    )


def _context_namespace(path: Path, context: str | None) -> str:
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "default"
    name = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if entry.get("name") == name:
            return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"
