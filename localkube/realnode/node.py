"""One real node: containerd + runc, the kubelet and kube-proxy, in the node's namespaces.

Built from the same pin as the control plane (scripts/build-control-plane builds kubelet and
kube-proxy too); containerd 2 (containerd, its runc shim, ctr) is built from Go modules by
scripts/build-containerd; runc and the CNI plugins are Debian's. The project's images are
pulled from the test bed's registry (localkube/projectregistry.py); the other images built
by scripts/build-images (the pause image, the test guest) are imported into the node's
containerd, or all of them when the cluster has no registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from localkube import projectregistry
from localkube.errors import ComponentFailed
from localkube.health import log_tail
from localkube.procs import (
    DaemonSpec,
    carries_marker,
    read_pidfile,
    reap_mentioning,
    run_cmd,
    spawn_detached,
    stop_process,
)
from localkube.realnode import configs, multus, noderes
from localkube.realnode.configs import NodeLayout
from localkube.realnode.namespaces import NodeNamespaces

log = structlog.get_logger()

K8S_NAMESPACE = "k8s.io"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInputs:
    """What a node needs from its cluster."""

    bin_dir: Path
    containerd_bin: Path  # containerd, containerd-shim-runc-v2, ctr (scripts/build-containerd)
    kubeconfig: Path
    proxy_kubeconfig: Path
    ca_file: Path
    logs: Path
    run: Path
    marker: tuple[str, str]
    images: tuple[tuple[str, Path], ...]
    multus_dir: Path | None = None  # scripts/build-multus: multus is the primary CNI plugin
    multus_kubeconfig: Path | None = None
    resources: noderes.NodeResources = field(default_factory=noderes.NodeResources)
    registry_host: str | None = None  # the test bed's registry (address:port), trusted
    # The project's registry (address:port): serves registry.local/kubevirt-py/virt-*.
    project_registry_host: str | None = None


class RealNode:
    def __init__(self, *, ns: NodeNamespaces, inputs: NodeInputs) -> None:
        self.ns = ns
        self.layout: NodeLayout = ns.layout
        self.inputs = inputs

    @property
    def name(self) -> str:
        return self.layout.name

    def _spec(self, component: str, argv: Sequence[str]) -> DaemonSpec:
        name = f"{component}-{self.name}"
        return DaemonSpec(
            name=name,
            argv=(*self.ns.enter(), *argv),
            log_file=self.inputs.logs / f"{name}.log",
            pidfile=self.inputs.run / f"{name}.pid",
        )

    def specs(self) -> dict[str, DaemonSpec]:
        cfg, bin_dir = self.layout.config_dir, self.inputs.bin_dir
        return {
            "containerd": self._spec(
                "containerd",
                [
                    str(self.inputs.containerd_bin / "containerd"),
                    "--config",
                    str(cfg / "containerd.toml"),
                ],
            ),
            "kubelet": self._spec(
                "kubelet",
                [
                    str(bin_dir / "kubelet"),
                    f"--config={cfg / 'kubelet.yaml'}",
                    f"--kubeconfig={self.inputs.kubeconfig}",
                    f"--hostname-override={self.name}",
                    f"--node-ip={self.layout.node_ips}",
                    "--v=1",
                ],
            ),
            "kube-proxy": self._spec(
                "kube-proxy",
                [str(bin_dir / "kube-proxy"), f"--config={cfg / 'kube-proxy.yaml'}", "--v=1"],
            ),
        }

    def running(self, component: str) -> bool:
        pid = read_pidfile(self.specs()[component].pidfile)
        return pid is not None and carries_marker(pid, self.inputs.marker)

    def write_configs(self) -> None:
        node, cfg = self.layout, self.layout.config_dir
        cfg.mkdir(parents=True, exist_ok=True)
        node.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        shim = self.inputs.containerd_bin / "containerd-shim-runc-v2"
        multus_dir, multus_conf = self.inputs.multus_dir, node.cni_conf_dir / multus.CONF_NAME
        cni_bin = (multus_dir,) if multus_dir is not None else ()
        (cfg / "containerd.toml").write_text(
            configs.containerd_toml(node, shim=shim, cni_bin=cni_bin)
        )
        (node.cni_conf_dir / "10-kubevirt-py.conflist").write_text(configs.cni_conflist(node))
        self._write_registry_trust()
        if multus.built(multus_dir) and self.inputs.multus_kubeconfig is not None:
            delegate = configs.cluster_network(node)
            multus_conf.write_text(
                multus.conf(
                    delegate=delegate, kubeconfig=self.inputs.multus_kubeconfig, node_dir=node.dir
                )
            )
        else:
            multus_conf.unlink(missing_ok=True)
        resources = self.inputs.resources
        (cfg / "kubelet.yaml").write_text(
            configs.kubelet_yaml(node, ca_file=self.inputs.ca_file, resources=resources)
        )
        noderes.reset_stale_checkpoint(node.kubelet_dir, policy=resources.cpu_manager_policy)
        (cfg / "kube-proxy.yaml").write_text(
            configs.kube_proxy_yaml(node, kubeconfig=self.inputs.proxy_kubeconfig)
        )
        (cfg / "resolv.conf").write_text("# no cluster DNS; nothing resolves outside\n")

    def _write_registry_trust(self) -> None:
        ca = self.inputs.ca_file
        trusted: list[tuple[str | None, str | None]] = [
            (self.inputs.registry_host, None),
            (self.inputs.project_registry_host, projectregistry.MIRRORED),
        ]
        for host, name in trusted:
            if host is None:
                continue
            hosts_dir = self.layout.registry_config_dir / (name or host)
            hosts_dir.mkdir(parents=True, exist_ok=True)
            toml = configs.registry_hosts_toml(host, ca_file=ca, name=name)
            (hosts_dir / "hosts.toml").write_text(toml)

    async def start_runtime(self) -> None:
        """Namespaces, containerd (answering), and the images imported."""
        self.write_configs()
        await self.ns.create()
        if not self.running("containerd"):
            spawn_detached(self.specs()["containerd"], marker=self.inputs.marker)
        await self._wait_containerd()
        await self.import_images()

    def start_kubelet(self) -> None:
        for component in ("kubelet", "kube-proxy"):
            if not self.running(component):
                spawn_detached(self.specs()[component], marker=self.inputs.marker)

    async def _wait_containerd(self, timeout: float = 30.0) -> None:
        spec = self.specs()["containerd"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            with contextlib.suppress(Exception):
                await self._ctr("version", timeout=5)
                return
            if not self.running("containerd"):
                break
            await asyncio.sleep(0.2)
        raise ComponentFailed(spec.name, "containerd did not answer", log_tail(spec.log_file))

    async def _ctr(self, *args: str, timeout: float = 120.0) -> str:
        return await run_cmd(
            [
                str(self.inputs.containerd_bin / "ctr"),
                "--address",
                str(self.layout.containerd_socket),
                "-n",
                K8S_NAMESPACE,
                *args,
            ],
            timeout=timeout,
        )

    async def import_images(self) -> None:
        """Import every image archive not imported yet (a stamp per archive content)."""
        stamps = self.layout.dir / "images"
        stamps.mkdir(parents=True, exist_ok=True)
        for ref, archive in self.inputs.images:
            stat = archive.stat()
            key = hashlib.sha256(f"{ref} {archive} {stat.st_size} {stat.st_mtime_ns}".encode())
            stamp = stamps / key.hexdigest()[:16]
            if stamp.exists() and ref in await self._ctr("images", "ls", "-q", timeout=30):
                continue
            await self._ctr("images", "import", str(archive), timeout=300)
            stamp.write_text(f"{ref} {archive}\n")
            log.info("image_imported", node=self.name, image=ref)

    async def forget_stale(self, served: dict[str, str]) -> None:
        """Untag each served ``ref`` the node holds at another digest than the registry's
        (a cluster kept up across a rebuild): the next pod using it pulls the new one."""
        if not served:
            return
        for line in (await self._ctr("images", "ls", timeout=30)).splitlines()[1:]:
            ref, _, digest, *_ = [*line.split(), "", "", ""]
            if ref in served and digest != served[ref]:
                await self._ctr("images", "rm", ref, timeout=60)
                log.info("stale_image_untagged", node=self.name, image=ref, digest=digest)

    async def stop(self, *, grace: float = 20.0) -> None:
        """kubelet and kube-proxy, then every container (the node's cgroups), then containerd
        and its shims, then the namespaces."""
        for component in ("kubelet", "kube-proxy"):
            await self._stop(component, grace=grace)
        await self.ns.kill_processes()
        await self._stop("containerd", grace=grace)
        await reap_mentioning(self.layout.containerd_dir)
        await self.ns.destroy()

    async def _stop(self, component: str, *, grace: float) -> None:
        spec = self.specs()[component]
        pid = read_pidfile(spec.pidfile)
        if pid is not None:
            await stop_process(pid, marker=self.inputs.marker, grace=grace)
        with contextlib.suppress(FileNotFoundError):
            spec.pidfile.unlink()
