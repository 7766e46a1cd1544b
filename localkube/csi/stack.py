"""The CSI stack of a real-node local cluster: what `up` starts and `down` stops.

Host processes (like the control plane): the driver's controller side on a unix socket,
Kubernetes' csi-provisioner and csi-snapshotter against it, the snapshot-controller, and
the test bed's expansion loop (the external-resizer is not served). Per node, inside the
node's namespaces (like its kubelet): the driver's node side, which registers itself with
the kubelet. API objects: the VolumeSnapshot CRDs (from the external-snapshotter's client
module), the CSIDriver (`attachRequired: false`), the default StorageClass `csi-local`
(expandable, Immediate binding: the storage is one host directory every node sees) and the
default VolumeSnapshotClass `csi-local-snapshots`.

Sidecar binaries and CRDs come from scripts/build-csi-sidecars (the config's `csi_dir`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from localkube.config import ClusterConfig
from localkube.csi.node import loops_of
from localkube.csi.service import DRIVER
from localkube.errors import CommandFailed, ComponentFailed
from localkube.health import log_tail
from localkube.procs import (
    DaemonSpec,
    carries_marker,
    pid_alive,
    read_pidfile,
    run_cmd,
    spawn_detached,
    stop_process,
)

log = structlog.get_logger()

STORAGE_CLASS = "csi-local"
SNAPSHOT_CLASS = "csi-local-snapshots"
CSI_SUBDIR = "_csi"  # under the nodes dir, beside the shared local PVs' "_shared"
SIDECARS = ("csi-provisioner", "csi-snapshotter", "snapshot-controller")
LABEL = "kubevirt-py.io/csi-local"
READY_TIMEOUT = 90.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CsiStack:
    config: ClusterConfig
    marker: tuple[str, str]
    node_enter: dict[str, tuple[str, ...]]  # node → argv prefix entering its namespaces

    @property
    def root(self) -> Path:
        """The host directory holding every volume and snapshot; each node sees it at the
        same path (only the node's own directories are bound over in its mount namespace)."""
        return self.config.nodes_dir / CSI_SUBDIR

    @property
    def endpoint(self) -> Path:
        return self.config.paths.run / "csi-controller.sock"

    @property
    def kubectl(self) -> list[str]:
        return [
            str(self.config.bin_dir / "kubectl"),
            "--kubeconfig",
            str(self.config.paths.admin_kubeconfig),
        ]

    def _python(self, name: str, args: Sequence[str], *, prefix: Sequence[str] = ()) -> DaemonSpec:
        paths = self.config.paths
        return DaemonSpec(
            name=name,
            argv=(*prefix, str(self.config.python), "-m", "localkube.csi", *args),
            log_file=paths.log(name),
            pidfile=paths.pidfile(name),
            env={"PYTHONPATH": str(self.config.repo), "PYTHONUNBUFFERED": "1"},
        )

    def _sidecar(self, name: str, csi_dir: Path, *args: str) -> DaemonSpec:
        paths = self.config.paths
        return DaemonSpec(
            name=name,
            argv=(
                str(csi_dir / name),
                f"--kubeconfig={paths.admin_kubeconfig}",
                "--leader-election=false",
                "--v=2",
                *args,
            ),
            log_file=paths.log(name),
            pidfile=paths.pidfile(name),
        )

    def specs(self) -> list[DaemonSpec]:
        """Every process of the stack, in start order."""
        csi_dir = self.config.csi_dir
        if csi_dir is None:
            raise ComponentFailed(
                "csi", "no CSI sidecars: run scripts/build-csi-sidecars (KUBEVIRT_PY_CSI_DIR)"
            )
        sock = f"--csi-address={self.endpoint}"
        ctl = ["controller", f"--root={self.root}", f"--endpoint={self.endpoint}"]
        kubectl = self.config.bin_dir / "kubectl"
        expander = ["expander", f"--endpoint={self.endpoint}", f"--kubectl={kubectl}",
                    f"--kubeconfig={self.config.paths.admin_kubeconfig}"]  # fmt: skip
        nodes = [
            self._python(
                f"csi-node-{node}",
                ["node", f"--root={self.root}", f"--node-id={node}"],
                prefix=self.node_enter[node],
            )
            for node in self.config.nodes
        ]
        return [
            self._python("csi-controller", ctl),
            self._sidecar(
                "csi-provisioner", csi_dir, sock, "--timeout=300s", "--extra-create-metadata"
            ),
            self._sidecar("csi-snapshotter", csi_dir, sock, "--timeout=300s"),
            self._sidecar("snapshot-controller", csi_dir),
            self._python("csi-expander", expander),
            *nodes,
        ]

    def manifests(self) -> list[dict[str, Any]]:
        meta = {"labels": {LABEL: "true"}}
        default = {"storageclass.kubernetes.io/is-default-class": "true"}
        default_snap = {"snapshot.storage.kubernetes.io/is-default-class": "true"}
        return [
            {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
             "metadata": {"name": DRIVER, **meta},
             "spec": {"attachRequired": False, "podInfoOnMount": False, "fsGroupPolicy": "File",
                      "volumeLifecycleModes": ["Persistent"]}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": STORAGE_CLASS, "annotations": default, **meta},
             "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
             "allowVolumeExpansion": True},
            {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
             "metadata": {"name": SNAPSHOT_CLASS, **meta,
                          "annotations": default_snap},
             "driver": DRIVER, "deletionPolicy": "Delete"},
        ]  # fmt: skip

    async def up(self) -> None:
        """CRDs, processes, API objects; returns once every node's kubelet took the driver."""
        assert self.config.csi_dir is not None or self.specs()
        self.root.mkdir(parents=True, exist_ok=True)
        crds = sorted((self.config.csi_dir or Path()).glob("crd/*.yaml"))
        if not crds:
            raise ComponentFailed("csi", f"no VolumeSnapshot CRDs in {self.config.csi_dir}/crd")
        await run_cmd([*self.kubectl, "apply", *(f"--filename={c}" for c in crds)], timeout=60)
        await run_cmd(
            [*self.kubectl, "wait", "--for=condition=Established", "--timeout=60s",
             *(f"crd/{c.name.removesuffix('.yaml').partition('_')[2]}.{c.name.partition('_')[0]}"
               for c in crds)],
            timeout=90,
        )  # fmt: skip
        for spec in self.specs():
            if not self._running(spec):
                spawn_detached(spec, marker=self.marker)
        manifest = self.config.paths.root / "csi-local.json"
        manifest.write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": self.manifests()})
        )
        await run_cmd([*self.kubectl, "apply", "-f", str(manifest)], timeout=60)
        await self._wait_registered()
        log.info("csi_stack_up", driver=DRIVER, storage_class=STORAGE_CLASS)

    def _running(self, spec: DaemonSpec) -> bool:
        pid = read_pidfile(spec.pidfile)
        return pid is not None and carries_marker(pid, self.marker)

    async def _wait_registered(self) -> None:
        """Every node's CSINode lists the driver (its kubelet called the driver back)."""
        loop = asyncio.get_running_loop()
        deadline, missing = loop.time() + READY_TIMEOUT, list(self.config.nodes)
        while loop.time() < deadline:
            self._check_alive()
            missing = [n for n in self.config.nodes if not await self._registered(n)]
            if not missing:
                return
            await asyncio.sleep(0.5)
        name = f"csi-node-{missing[0]}"
        raise ComponentFailed(
            name, f"kubelet did not register {DRIVER}", log_tail(self.config.paths.log(name))
        )

    async def _registered(self, node: str) -> bool:
        with contextlib.suppress(CommandFailed):
            out = await run_cmd([*self.kubectl, "get", "csinode", node, "-o", "json"], timeout=30)
            return any(
                d.get("name") == DRIVER for d in json.loads(out)["spec"].get("drivers") or []
            )
        return False

    def _check_alive(self) -> None:
        for spec in self.specs():
            pid = read_pidfile(spec.pidfile)
            if pid is None or not pid_alive(pid):
                raise ComponentFailed(spec.name, "exited while starting", log_tail(spec.log_file))

    async def stop(self) -> None:
        """Every process of the stack (reverse order)."""
        for spec in reversed(self.specs() if self.config.csi_dir else self._spec_names()):
            pid = read_pidfile(spec.pidfile)
            if pid is not None:
                await stop_process(pid, marker=self.marker, grace=10)
            with contextlib.suppress(FileNotFoundError):
                spec.pidfile.unlink()

    def _spec_names(self) -> list[DaemonSpec]:
        """Stop-only specs (pidfiles) when the sidecars' directory is not known."""
        names = [
            "csi-controller",
            *SIDECARS,
            "csi-expander",
            *(f"csi-node-{n}" for n in self.config.nodes),
        ]
        paths = self.config.paths
        return [
            DaemonSpec(name=n, argv=(), log_file=paths.log(n), pidfile=paths.pidfile(n))
            for n in names
        ]

    async def release_loops(self) -> None:
        """Detach the loop devices left over the stack's files (nodes torn down first)."""
        for disk in self.root.glob("volumes/*/disk.raw"):
            for loop in loops_of(disk):
                with contextlib.suppress(CommandFailed):
                    await run_cmd(["losetup", "--detach", loop], timeout=30)
                    log.info("csi_loop_released", loop=loop, disk=str(disk))
