"""Where a local cluster lives and what it runs: one frozen value passed everywhere.

The environment is read here and nowhere else, so the cluster manager, the CLI and the
test fixtures all agree on paths.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from localkube.realnode.noderes import NodeResources

DEFAULT_CLUSTER_DIR = "/var/lib/kubevirt-py/cluster"
# Short on purpose: pod volume paths below it hold unix sockets (108-byte limit).
DEFAULT_NODES_DIR = "/var/lib/kvpy"
DEFAULT_NODES = ("node01", "node02")
MARKER_ENV = "KVPY_LOCALKUBE"
REPO = Path(__file__).resolve().parent.parent


class NodeKind(StrEnum):
    """``kubelet``: real kubelets with containerd and runc, each node in its own network and
    mount namespaces (what ./scripts/up runs). ``process``: our node agent running pods as
    host processes (fast; for the controller/handler suites and process-level checks)."""

    KUBELET = "kubelet"
    PROCESS = "process"


def read_image_list(path: Path) -> tuple[tuple[str, Path], ...]:
    """scripts/build-images' output, saved in a file: one ``<ref> <oci archive>`` per line."""
    return parse_image_list(path.read_text())


def parse_image_list(text: str) -> tuple[tuple[str, Path], ...]:
    """scripts/build-images' output: one ``<ref> <oci archive>`` per line."""
    images = []
    for line in text.splitlines():
        if line.strip():
            ref, archive = line.split(maxsplit=1)
            images.append((ref, Path(archive)))
    return tuple(images)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """Inputs of one local cluster; everything else is derived from these."""

    state_dir: Path
    nodes_dir: Path
    bin_dir: Path
    # containerd 2 for real nodes (scripts/build-containerd prints it); empty: not built.
    containerd_bin: Path = Path()
    nodes: tuple[str, ...] = DEFAULT_NODES
    python: Path = Path(sys.executable)
    repo: Path = REPO
    node_kind: NodeKind = NodeKind.PROCESS
    images: tuple[tuple[str, Path], ...] = ()
    # scripts/build-csi-sidecars' output (sidecar binaries, crd/); real nodes need it
    csi_dir: Path | None = None
    # scripts/build-multus' output (the thin plugin); real nodes run multus when set
    multus_dir: Path | None = None
    # the kubelets' static CPU manager and the host's hugepages (localkube/realnode/noderes.py)
    node_resources: NodeResources = dataclasses.field(default_factory=NodeResources)
    # scripts/build-registry's output (registry, htpasswd); real nodes run a registry when set
    registry_dir: Path | None = None

    @classmethod
    def from_env(cls, *, bin_dir: Path | None = None) -> ClusterConfig:
        env = os.environ
        count = int(env.get("KUBEVIRT_PY_NODES", str(len(DEFAULT_NODES))))
        kube_bin = bin_dir or Path(env.get("KUBEVIRT_PY_KUBE_BIN", ""))
        image_list = env.get("KUBEVIRT_PY_IMAGE_LIST")
        csi_dir = env.get("KUBEVIRT_PY_CSI_DIR")
        multus_dir = env.get("KUBEVIRT_PY_MULTUS_DIR")
        registry_dir = env.get("KUBEVIRT_PY_REGISTRY_DIR")
        return cls(
            state_dir=Path(env.get("KUBEVIRT_PY_CLUSTER_DIR", DEFAULT_CLUSTER_DIR)),
            nodes_dir=Path(env.get("KUBEVIRT_PY_NODES_DIR", DEFAULT_NODES_DIR)),
            bin_dir=kube_bin,
            containerd_bin=Path(env.get("KUBEVIRT_PY_CONTAINERD_BIN", "")),
            nodes=tuple(f"node{i:02d}" for i in range(1, count + 1)),
            node_kind=NodeKind(env.get("KUBEVIRT_PY_NODE_KIND", NodeKind.KUBELET)),
            images=read_image_list(Path(image_list)) if image_list else (),
            csi_dir=Path(csi_dir) if csi_dir else None,
            multus_dir=Path(multus_dir) if multus_dir else None,
            node_resources=NodeResources(
                cpu_manager_static=env.get("KUBEVIRT_PY_CPU_MANAGER", "none") == "static",
                hugepages_2mi=int(env.get("KUBEVIRT_PY_HUGEPAGES_2MI", "0")),
            ),
            registry_dir=Path(registry_dir) if registry_dir else None,
        )

    def replace(self, **changes: object) -> ClusterConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def cluster_id(self) -> str:
        """Stable id marking every process of this cluster (see procs.reap_marked)."""
        return hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:12]

    @property
    def paths(self) -> ClusterPaths:
        return ClusterPaths(root=self.state_dir)

    def device_plugins_dir(self, node: str) -> Path:
        """The node agent's kubelet device-plugins dir (AgentConfig.device_plugins_dir)."""
        return self.nodes_dir / node / "device-plugins"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterPaths:
    """The layout of the state directory."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def kubeconfigs(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    @property
    def ports_file(self) -> Path:
        return self.root / "ports.json"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def pidfile(self, component: str) -> Path:
        return self.run / f"{component}.pid"

    def kubeconfig(self, user: str) -> Path:
        return self.kubeconfigs / f"{user}.kubeconfig"
