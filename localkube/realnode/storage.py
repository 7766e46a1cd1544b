"""Real storage for a real-node cluster: node-local directories as static `local`
PersistentVolumes (each with the nodeAffinity of its node) and a StorageClass
(`local-storage`; the default class is the CSI stack's, localkube.csi) without a
provisioner that binds on first consumer, so claims are bound by the real
kube-controller-manager and kube-scheduler and mounted by the real kubelet.

Shared storage too: a `shared-storage` StorageClass of ReadWriteMany PVs that every node
may mount, for VMs that live-migrate on a claim (KubeVirt needs RWX claims for that). A
real cluster would serve them over NFS; this machine's kernel has no NFS client (no `nfs`
in /proc/filesystems, no modules to load), so the kubelet could not mount an `nfs:` PV.
They stand in for NFS as `local` PVs on one host directory, `<nodes dir>/_shared/rwx-<i>`,
which every node's mount namespace sees at the same path (only the node's own directories
are bound over), with a nodeAffinity naming every node. Both nodes' kubelets bind-mount the
same directory into their pods, so both launchers open the same disk.img, as they would
on NFS (where libvirt, seeing the filesystem type, would also know it is shared).

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
SHARED_STORAGE_CLASS = "shared-storage"
SHARED_SUBDIR = "_shared"  # "_" keeps it apart from every node's directory (DNS names)
LABEL = "kubevirt-py.io/local-storage"
STORAGE_SUBDIR = "storage"
HOSTNAME_KEY = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalStorage:
    """`per_node` volumes of `capacity` on each node."""

    nodes: Sequence[str]
    nodes_dir: Path
    per_node: int = 16  # a PV is Released, not reused, once its claim goes: the suite needs many
    capacity: str = "1Gi"
    shared: int = 4  # ReadWriteMany volumes every node mounts

    def pv_dir(self, node: str, index: int) -> Path:
        return self.nodes_dir / node / STORAGE_SUBDIR / f"pv-{index}"

    def shared_dir(self, index: int) -> Path:
        return self.nodes_dir / SHARED_SUBDIR / f"rwx-{index}"

    def dirs(self) -> list[Path]:
        """Every PV's directory."""
        local = [self.pv_dir(node, i) for node in self.nodes for i in range(self.per_node)]
        return local + [self.shared_dir(i) for i in range(self.shared)]

    def storage_class(self) -> dict[str, Any]:
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "labels": {LABEL: "true"},
                "annotations": {"storageclass.kubernetes.io/is-default-class": "false"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        }

    def shared_storage_class(self) -> dict[str, Any]:
        """Not the default: a claim asks for it by name (and for ReadWriteMany)."""
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": SHARED_STORAGE_CLASS, "labels": {LABEL: "true"}},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "Immediate",
            "reclaimPolicy": "Retain",
        }

    def volume(self, node: str, index: int) -> dict[str, Any]:
        """One node-local PV, pinned to its node."""
        return _pv(
            f"local-{node}-{index}",
            path=self.pv_dir(node, index),
            nodes=[node],
            capacity=self.capacity,
            access_mode="ReadWriteOnce",
            storage_class=STORAGE_CLASS,
        )

    def shared_volume(self, index: int) -> dict[str, Any]:
        """One ReadWriteMany PV on the directory every node sees (NFS's stand-in)."""
        return _pv(
            f"shared-{index}",
            path=self.shared_dir(index),
            nodes=list(self.nodes),
            capacity=self.capacity,
            access_mode="ReadWriteMany",
            storage_class=SHARED_STORAGE_CLASS,
        )

    def manifests(self) -> list[dict[str, Any]]:
        local = [self.volume(node, i) for node in self.nodes for i in range(self.per_node)]
        shared = [self.shared_volume(i) for i in range(self.shared)]
        classes = [self.storage_class(), self.shared_storage_class()]
        return classes + local + shared

    async def up(self, *, kubectl: Path, kubeconfig: Path, manifest: Path) -> None:
        """Directories made, the StorageClass and PVs applied."""
        for path in self.dirs():
            path.mkdir(parents=True, exist_ok=True)
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
        shutil.rmtree(self.nodes_dir / SHARED_SUBDIR, ignore_errors=True)


def _pv(
    name: str, *, path: Path, nodes: list[str], capacity: str, access_mode: str, storage_class: str
) -> dict[str, Any]:
    """A `local` PersistentVolume on `path`, mountable on `nodes`."""
    match = {"key": HOSTNAME_KEY, "operator": "In", "values": nodes}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "spec": {
            "capacity": {"storage": capacity},
            "accessModes": [access_mode],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "volumeMode": "Filesystem",
            "local": {"path": str(path)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [match]}]}},
        },
    }
