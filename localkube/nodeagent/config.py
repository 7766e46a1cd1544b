"""Configuration of one node agent (the kubelet stand-in), parsed from its arguments."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from localkube.config import MARKER_ENV, REPO
from localkube.imagestore import default_root
from localkube.nodeagent.cgroups import hierarchy

POD_ENV_MARKER = "KVPY_POD"
# <pod uid>/<container name>: finds a container's processes where it has no cgroup.
CONTAINER_ENV_MARKER = "KVPY_CONTAINER"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """What a node agent needs; paths below ``root`` are kept short (unix socket limit)."""

    node: str
    kubeconfig: Path
    root: Path
    python: Path
    repo: Path
    marker: tuple[str, str]
    # The local image store: images without an entry point run from here (data images).
    image_store: Path
    # A cgroup hierarchy for per-container cgroups (cgroups.py); None: not available.
    cgroup_root: Path | None = None
    max_pods: int = 110
    lease_seconds: int = 40
    lease_renew_interval: float = 5.0
    status_interval: float = 10.0
    restart_backoff_initial: float = 2.0
    restart_backoff_max: float = 60.0
    shutdown_grace_max: float = 10.0

    @property
    def node_dir(self) -> Path:
        return self.root / self.node

    @property
    def pods_dir(self) -> Path:
        return self.node_dir / "pods"

    @property
    def device_plugins_dir(self) -> Path:
        """Where device plugins find kubelet.sock: per node, as each node has its own."""
        return self.node_dir / "device-plugins"

    def pod_dir(self, uid: str) -> Path:
        return self.pods_dir / uid

    @property
    def node_cgroup(self) -> Path | None:
        """This agent's part of the cgroup tree (its pods' cgroups below it)."""
        if self.cgroup_root is None:
            return None
        return self.cgroup_root / "kvpy" / self.marker[1] / self.node

    def pod_cgroup(self, uid: str) -> Path | None:
        node = self.node_cgroup
        return None if node is None else node / uid

    @classmethod
    def from_args(cls, argv: list[str]) -> AgentConfig:
        p = argparse.ArgumentParser(prog="localkube.nodeagent", description=__doc__)
        p.add_argument("--node", required=True)
        p.add_argument("--kubeconfig", type=Path, required=True)
        p.add_argument("--root", type=Path, default=Path("/var/lib/kvpy"))
        p.add_argument("--python", type=Path, default=Path(sys.executable))
        p.add_argument("--repo", type=Path, default=REPO)
        p.add_argument("--image-store", type=Path, default=default_root(os.environ))
        a = p.parse_args(argv)
        marker = (MARKER_ENV, os.environ.get(MARKER_ENV, f"nodeagent-{a.node}"))
        return cls(
            node=a.node,
            kubeconfig=a.kubeconfig,
            root=a.root,
            python=a.python,
            repo=a.repo,
            marker=marker,
            image_store=a.image_store,
            cgroup_root=hierarchy(),
        )
