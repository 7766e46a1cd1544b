"""The Node object of one agent: registration, capacity, the Lease and Ready heartbeats.

The node lifecycle controller judges a node by its Lease in kube-node-lease; when the
agent stops renewing it the controller marks the Node NotReady (Ready=Unknown) after
--node-monitor-grace-period, as with a dead kubelet.

Extended resources (devices.kubevirt.io/*) come only from registered device plugins
(devices.py): a change is posted at once (`poke`), and one the Node still shows from an
earlier agent reads 0 until its plugin registers again.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import structlog

from localkube.nodeagent.config import AgentConfig
from localkube.nodeagent.kube import JSON, MERGE, SMP, Kube, KubeError

log = structlog.get_logger()

LOOPBACK = "127.0.0.1"
DeviceCapacity = Callable[[], Mapping[str, str]]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _memory_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    raise RuntimeError("no MemTotal in /proc/meminfo")


def capacity(cfg: AgentConfig) -> dict[str, str]:
    """Resources as the machine has them (every node of the local cluster shares them);
    device-plugin resources are added by the caller."""
    disk = shutil.disk_usage(cfg.root if cfg.root.exists() else "/")
    cap = {
        "cpu": str(os.cpu_count() or 1),
        "memory": f"{_memory_kib()}Ki",
        "pods": str(cfg.max_pods),
        "ephemeral-storage": f"{disk.total // 1024}Ki",
        "hugepages-2Mi": "0",
        "hugepages-1Gi": "0",
    }
    return cap


def _os_image() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return "Linux"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def node_status(cfg: AgentConfig, *, version: str, devices: Mapping[str, str]) -> JSON:
    cap = {**capacity(cfg), **devices}
    return {
        "capacity": cap,
        "allocatable": cap,
        "addresses": [
            {"type": "InternalIP", "address": LOOPBACK},
            {"type": "Hostname", "address": cfg.node},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _read("/etc/machine-id"),
            "systemUUID": _read("/sys/class/dmi/id/product_uuid") or _read("/etc/machine-id"),
            "bootID": _read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": platform.release(),
            "osImage": _os_image(),
            "containerRuntimeVersion": "localkube://0.1.0",
            "kubeletVersion": version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def conditions(*, transition: str) -> list[JSON]:
    beat = now_rfc3339()

    def cond(kind: str, status: str, reason: str, message: str) -> JSON:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": beat,
            "lastTransitionTime": transition,
        }

    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "no memory pressure"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "no PID pressure"),
        cond("Ready", "True", "KubeletReady", "localkube node agent is posting ready status"),
    ]


class NodeHeartbeat:
    """Registers the Node, then keeps its Lease and Ready condition fresh."""

    def __init__(
        self, kube: Kube, cfg: AgentConfig, *, devices: DeviceCapacity, poke: asyncio.Event
    ) -> None:
        self._kube = kube
        self._cfg = cfg
        self._devices = devices
        self._poke = poke  # set: post status now (device capacity changed)
        self._stale: dict[str, str] = {}  # extended resources of an earlier agent → "0"
        self._transition = now_rfc3339()
        self._version = "v0.0.0"
        self._node_uid = ""

    async def register(self) -> None:
        cfg = self._cfg
        self._version = str((await self._kube.get("/version")).get("gitVersion", "v0.0.0"))
        labels = {
            "kubernetes.io/hostname": cfg.node,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": cfg.node, "labels": labels},
            "spec": {},
        }
        try:
            node = await self._kube.request("POST", "/api/v1/nodes", body=body)
            log.info("node_registered", node=cfg.node)
        except KubeError as e:
            if e.status != 409:
                raise
            node = await self._kube.request(
                "PATCH",
                f"/api/v1/nodes/{cfg.node}",
                body={"metadata": {"labels": labels}},
                content_type=SMP,
            )
            log.info("node_reregistered", node=cfg.node)
        self._node_uid = node["metadata"]["uid"]
        shown = (node.get("status") or {}).get("capacity") or {}
        self._stale = {name: "0" for name in shown if "/" in name}
        await self.post_status()
        await self.renew_lease()

    async def post_status(self) -> None:
        devices = {**self._stale, **self._devices()}
        status = node_status(self._cfg, version=self._version, devices=devices)
        status["conditions"] = conditions(transition=self._transition)
        await self._kube.request(
            "PATCH",
            f"/api/v1/nodes/{self._cfg.node}/status",
            body={"status": status},
            content_type=SMP,
        )

    async def renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self._cfg.node}"
        spec = {
            "holderIdentity": self._cfg.node,
            "renewTime": now_micro(),
            "leaseDurationSeconds": self._cfg.lease_seconds,
        }
        try:
            await self._kube.request("PATCH", path, body={"spec": spec}, content_type=MERGE)
        except KubeError as e:
            if e.status != 404:
                raise
            owner = {
                "apiVersion": "v1",
                "kind": "Node",
                "name": self._cfg.node,
                "uid": self._node_uid,
            }
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self._cfg.node,
                    "namespace": "kube-node-lease",
                    "ownerReferences": [owner],
                },
                "spec": spec,
            }
            await self._kube.request("POST", path.rsplit("/", 1)[0], body=body)

    async def run(self) -> None:
        """Renew the Lease every few seconds and post status every status_interval, or at
        once when poked."""
        loop = asyncio.get_running_loop()
        next_status = loop.time() + self._cfg.status_interval
        next_lease = loop.time() + self._cfg.lease_renew_interval
        while True:
            poked = await self._wait_poke(max(0.0, next_lease - loop.time()))
            try:
                if loop.time() >= next_lease:
                    next_lease = loop.time() + self._cfg.lease_renew_interval
                    await self.renew_lease()
                if poked or loop.time() >= next_status:
                    next_status = loop.time() + self._cfg.status_interval
                    await self.post_status()
            except (KubeError, OSError, TimeoutError) as e:
                if (task := asyncio.current_task()) and task.cancelling():
                    raise
                log.warning("node_heartbeat_failed", node=self._cfg.node, error=str(e))

    async def _wait_poke(self, seconds: float) -> bool:
        """Sleep `seconds`; True (early) when poked."""
        try:
            async with asyncio.timeout(seconds):
                await self._poke.wait()
        except TimeoutError:
            if (task := asyncio.current_task()) and task.cancelling():
                raise
            return False
        self._poke.clear()
        return True
