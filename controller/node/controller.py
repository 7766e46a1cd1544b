"""The node controller: a handler whose heartbeat went stale marks its node unschedulable
and fails the VMIs there whose launcher pod is gone (controller/node/logic.py decides).

A node is looked at again when its heartbeat would expire, when the Node changes and when
a launcher pod on it changes or disappears, so a VMI fails as soon as its pod is gone.
"""

from __future__ import annotations

import dataclasses

import structlog

from controller.config import TimingConfig
from controller.deps import Deps
from controller.informers import NODE_INDEX, VMI_UID_INDEX
from controller.node.logic import NodeView, plan_node
from controller.reconcile import Reconciler, refresher
from controller.vmi.plan import FailureReason, failed
from shared.kube import NODES, VMIS, Handlers, NotFound, WorkQueue
from shared.labels import SCHEDULABLE_LABEL
from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance

log = structlog.get_logger("controller.node")


class NodeController(Reconciler):
    """Reconciles Nodes against their handlers' heartbeats."""

    kind = "node"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        timing: TimingConfig,
    ) -> None:
        super().__init__(deps, queue)
        self._timing = timing

    def handlers(self) -> tuple[Handlers[NodeView], Handlers[LauncherPod]]:
        """Callbacks for the node and pod informers."""
        nodes: Handlers[NodeView] = Handlers(
            on_add=lambda n: self.enqueue(n.name),
            on_update=lambda old, new: self.enqueue(new.name),
        )
        pods: Handlers[LauncherPod] = Handlers(
            on_update=lambda old, new: self._pod_changed(new),
            on_delete=self._pod_changed,
        )
        return nodes, pods

    def _pod_changed(self, pod: LauncherPod) -> None:
        if pod.node_name:
            node = self._informers.nodes.store.get(pod.node_name)
            if node is not None and node.has_handler:
                self.enqueue(pod.node_name)

    async def sync(self, key: str) -> None:
        node = self._informers.nodes.store.get(key)
        if node is None:
            return
        vmis = [
            self._vmi_recent.latest(v) or v
            for v in self._informers.vmis.store.by_index(NODE_INDEX, key)
        ]
        pods = self._informers.pods.store
        pods_of = {v.uid: pods.by_index(VMI_UID_INDEX, v.uid) for v in vmis}
        plan = plan_node(
            node, vmis, pods_of, now=self._clock(), timeout=self._timing.heartbeat_timeout
        )
        if plan.mark_unschedulable:
            patch = {"metadata": {"labels": {SCHEDULABLE_LABEL: "false"}}}
            await self._client.patch(NODES, key, patch)
            log.warning("node_marked_unschedulable", heartbeat=str(node.heartbeat))
        for vmi, message in plan.fail_vmis:
            await self._fail(vmi, message)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    async def _fail(self, vmi: VirtualMachineInstance, message: str) -> None:
        status = failed(vmi.status, FailureReason.NODE_UNRESPONSIVE, message, self._clock())
        new = dataclasses.replace(vmi, status=status)
        refresh = refresher(self._client, VMIS, VirtualMachineInstance, vmi.key)
        try:
            written = await self._vmi_writer.write_status(vmi, new, refresh=refresh)
        except NotFound:
            return
        if written is not vmi:
            self._vmi_recent.remember(written)
        log.warning("vmi_failed_node_unresponsive", vmi=vmi.key)
