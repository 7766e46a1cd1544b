"""Fake nodes for the controller benchmark (kwok-style): Node objects with room for
thousands of launcher pods and a tiny stand-in kubelet that keeps them Ready and marks
pods bound to them Running, so the controller is measured at a scale the real node agents
(110 pods each, one process per pod) cannot reach on one machine.

The stand-in kubelet's own API calls (Lease renewals, pod status patches) are reported
apart from the controller's.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.kube import (
    NODES,
    PODS,
    ApiError,
    DeleteOptions,
    KubeClient,
    NotFound,
    PatchType,
    Resource,
    TransportError,
)

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
FAKE_LABEL = "kubevirt-py.bench/fake-node"
RENEW_INTERVAL = 5.0


def _now(micro: bool = False) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.now(UTC).strftime(fmt)


def node_body(name: str, pods: int) -> dict[str, Any]:
    """A schedulable Node with a large capacity and the kubevirt device resources."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubevirt.io/schedulable": "true",
                FAKE_LABEL: "true",
            },
        },
        "spec": {},
    }


def node_status(pods: int) -> dict[str, Any]:
    capacity = {
        "cpu": "1000",
        "memory": "64Ti",
        "pods": str(pods),
        "devices.kubevirt.io/tun": str(pods),
        "devices.kubevirt.io/kvm": str(pods),
    }
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "fake node of the controller benchmark",
        "lastHeartbeatTime": _now(),
        "lastTransitionTime": _now(),
    }
    return {"capacity": capacity, "allocatable": capacity, "conditions": [ready]}


def running_status(pod: dict[str, Any]) -> dict[str, Any]:
    """What a kubelet reports once every container runs."""
    now = _now()
    containers = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "started": True,
            "state": {"running": {"startedAt": now}},
        }
        for c in pod["spec"].get("containers", [])
    ]
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return {
        "phase": "Running",
        "conditions": conditions,
        "containerStatuses": containers,
        "hostIP": "127.0.0.1",
        "podIP": "10.244.0.1",
        "startTime": now,
    }


@dataclass
class FakeNodes:
    """`count` fake nodes and their stand-in kubelet for pods in `namespace`."""

    kube: KubeClient
    namespace: str
    count: int
    pods_per_node: int
    names: list[str] = field(default_factory=list)
    started: int = 0

    async def create(self) -> None:
        self.names = [f"bench-fake-{i:03d}" for i in range(self.count)]
        for name in self.names:
            with contextlib.suppress(ApiError):
                await self.kube.create(NODES, node_body(name, self.pods_per_node))
        await self._heartbeat()

    async def run(self) -> None:
        """Keep nodes Ready and start pods bound to them, until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._heartbeats())
            tg.create_task(self._kubelet())

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(RENEW_INTERVAL)
            with contextlib.suppress(ApiError, TransportError):
                await self._heartbeat()

    async def _heartbeat(self) -> None:
        for name in self.names:
            await self.kube.patch(
                NODES,
                name,
                {"status": node_status(self.pods_per_node)},
                subresource="status",
                patch_type=PatchType.STRATEGIC,
            )
            await self._renew(name)

    async def _renew(self, name: str) -> None:
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _now(True)}
        try:
            await self.kube.patch(LEASES, name, {"spec": spec}, namespace="kube-node-lease")
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": spec,
            }
            await self.kube.create(LEASES, body, namespace="kube-node-lease")

    async def _kubelet(self) -> None:
        fake = set(self.names)
        started: set[str] = set()
        limit = asyncio.Semaphore(32)
        async with asyncio.TaskGroup() as tg:
            while True:
                listed = await self.kube.list_all(PODS, namespace=self.namespace)
                for pod in listed.items:
                    self._maybe_start(tg, limit, pod, fake, started)
                stream = self.kube.watch(
                    PODS, namespace=self.namespace, resource_version=listed.resource_version
                )
                with contextlib.suppress(ApiError, TransportError):
                    async with contextlib.aclosing(stream):
                        async for event in stream:
                            self._maybe_start(tg, limit, event.object, fake, started)

    def _maybe_start(
        self,
        tg: asyncio.TaskGroup,
        limit: asyncio.Semaphore,
        pod: dict[str, Any],
        fake: set[str],
        started: set[str],
    ) -> None:
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        uid = str(meta.get("uid") or "")
        if node not in fake or uid in started or meta.get("deletionTimestamp"):
            return
        started.add(uid)
        if (pod.get("status") or {}).get("phase") != "Running":
            tg.create_task(self._start(limit, pod))

    async def _start(self, limit: asyncio.Semaphore, pod: dict[str, Any]) -> None:
        async with limit:
            self.started += 1
            with contextlib.suppress(NotFound):
                await self.kube.patch(
                    PODS,
                    pod["metadata"]["name"],
                    {"status": running_status(pod)},
                    namespace=self.namespace,
                    subresource="status",
                    patch_type=PatchType.STRATEGIC,
                )

    async def force_delete_pods(self) -> None:
        """Pods on fake nodes never finish terminating by themselves: remove them."""
        for pod in (await self.kube.list_all(PODS, namespace=self.namespace)).items:
            with contextlib.suppress(NotFound):
                await self.kube.delete(
                    PODS,
                    pod["metadata"]["name"],
                    namespace=self.namespace,
                    options=DeleteOptions(grace_period_seconds=0),
                )

    async def delete(self) -> None:
        for name in self.names:
            with contextlib.suppress(NotFound):
                await self.kube.delete(NODES, name)
            with contextlib.suppress(NotFound):
                await self.kube.delete(LEASES, name, namespace="kube-node-lease")
