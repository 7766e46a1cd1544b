"""Real storage for a real-node cluster: node-local directories as static `local`
PersistentVolumes (each with the nodeAffinity of its node) and a default StorageClass
without a provisioner that binds on first consumer, so claims are bound by the real
kube-controller-manager and kube-scheduler and mounted by the real kubelet.

Made at `up` (idempotent: `kubectl apply`), removed at `down` (the PersistentVolumes and
their directories, data included). Each PV's directory is
`<nodes dir>/<node>/storage/pv-<i>`, a host path the node's mount namespace sees as is.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localkube.errors import CommandFailed
from localkube.procs import run_cmd

STORAGE_CLASS = "local-storage"
LABEL = "kubevirt-py.io/local-storage"
STORAGE_SUBDIR = "storage"
HOSTNAME_KEY = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalStorage:
    """`per_node` volumes of `capacity` on each node."""

    nodes: Sequence[str]
    nodes_dir: Path
    per_node: int = 6
    capacity: str = "1Gi"

    def pv_dir(self, node: str, index: int) -> Path:
        return self.nodes_dir / node / STORAGE_SUBDIR / f"pv-{index}"

    def storage_class(self) -> dict[str, Any]:
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "labels": {LABEL: "true"},
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        }

    def volume(self, node: str, index: int) -> dict[str, Any]:
        """One node-local PV, pinned to its node."""
        match = {"key": HOSTNAME_KEY, "operator": "In", "values": [node]}
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"local-{node}-{index}", "labels": {LABEL: "true"}},
            "spec": {
                "capacity": {"storage": self.capacity},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "volumeMode": "Filesystem",
                "local": {"path": str(self.pv_dir(node, index))},
                "nodeAffinity": {
                    "required": {"nodeSelectorTerms": [{"matchExpressions": [match]}]}
                },
            },
        }

    def manifests(self) -> list[dict[str, Any]]:
        return [self.storage_class()] + [
            self.volume(node, i) for node in self.nodes for i in range(self.per_node)
        ]

    async def up(self, *, kubectl: Path, kubeconfig: Path, manifest: Path) -> None:
        """Directories made, the StorageClass and PVs applied."""
        for node in self.nodes:
            for i in range(self.per_node):
                self.pv_dir(node, i).mkdir(parents=True, exist_ok=True)
        items = self.manifests()
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        await run_cmd(
            [str(kubectl), "--kubeconfig", str(kubeconfig), "apply", "-f", str(manifest)],
            timeout=60,
        )

    async def down(self, *, kubectl: Path, kubeconfig: Path) -> None:
        """The PVs and StorageClass deleted (best effort: the API may be gone), then the
        directories with their data."""
        for kind in ("persistentvolumes", "storageclasses"):
            with contextlib.suppress(CommandFailed):  # teardown goes on without the API
                await run_cmd(
                    [str(kubectl), "--kubeconfig", str(kubeconfig), "delete", kind, "-l",
                     f"{LABEL}=true", "--wait=false", "--ignore-not-found"],
                    timeout=30,
                )  # fmt: skip
        for node in self.nodes:
            shutil.rmtree(self.nodes_dir / node / STORAGE_SUBDIR, ignore_errors=True)
