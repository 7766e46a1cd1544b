"""The pods/eviction webhook (KubeVirt's virt-launcher-eviction-interceptor): an eviction
of a launcher pod (`kubectl drain`, the descheduler) is answered by its VMI's eviction
strategy (shared/eviction.py):

- allowed: not a launcher pod, a pod that has ended, a VMI that is gone or final, or a
  strategy that lets the VMI stop (None; LiveMigrateIfPossible when not migratable);
- evacuate: the VMI gets `status.evacuationNodeName` = the pod's node (not on a dry run)
  and the eviction is refused with 429, which `kubectl drain` retries; the evacuation
  controller migrates the VMI and its pod then ends, and the retried eviction passes;
- refused with 429 and the reason: LiveMigrate but not live-migratable, an evacuation
  already in progress, the pod the target of a migration in progress, or the API not
  answering. A pod on a node the VMI has left (a migration's old source) may go.

The answer depends on nothing but the pod, its VMI and the cluster default, so every
controller replica gives the same one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from shared.eviction import EvictionAction, eviction_verdict
from shared.kube import PODS, VMIS, ApiError, NotFound, Resource, TransportError
from shared.kube.ports import GetsPatches
from shared.labels import APP_LABEL, LAUNCHER_APP
from shared.launcherpod import decode_pod
from shared.model import EvictionStrategy, ParseError, VirtualMachineInstance
from virt_api.admission.review import AdmissionRequest, allow, too_many_requests

log = structlog.get_logger("virt_api.admission.eviction")


def is_dry_run(review: AdmissionRequest) -> bool:
    """The request is a dry run (request.dryRun, or the Eviction's deleteOptions say All)."""
    options = review.obj.get("deleteOptions")
    dry = options.get("dryRun") if isinstance(options, Mapping) else None
    return review.dry_run or (isinstance(dry, list) and "All" in dry)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionAdmitter:
    """Answers AdmissionReviews of pods/eviction."""

    client: GetsPatches
    default: EvictionStrategy
    timeout: float = 5.0
    # The KubeVirt CR's evictionStrategy read live; None: `default` (the flag).
    live_default: Callable[[], EvictionStrategy] | None = None

    async def admit(self, review: AdmissionRequest) -> dict[str, Any]:
        """The AdmissionReview answer for one eviction."""
        if review.operation != "CREATE":
            return allow(review.uid)
        try:
            return await self._admit(review)
        except (ApiError, TransportError, TimeoutError) as e:
            if isinstance(e, TimeoutError) and _cancelling():
                raise
            message = f"kubevirt-py could not decide the eviction of pod {review.name}: {e}"
            return too_many_requests(review.uid, message)

    async def _admit(self, review: AdmissionRequest) -> dict[str, Any]:
        raw_pod = await self._get(PODS, review.namespace, review.name)
        labels = (raw_pod or {}).get("metadata", {}).get("labels") or {}
        if raw_pod is None or labels.get(APP_LABEL) != LAUNCHER_APP:
            return allow(review.uid)
        pod = decode_pod(raw_pod)
        raw_vmi = await self._get(VMIS, review.namespace, pod.vmi_name) if pod.vmi_name else None
        if pod.terminal or raw_vmi is None:
            return allow(review.uid)
        try:
            vmi = VirtualMachineInstance.from_dict(raw_vmi)
        except ParseError:
            return allow(review.uid)  # admission never let such a VMI in; nothing to protect
        verdict = eviction_verdict(
            vmi,
            pod_node=pod.node_name,
            default=self.live_default() if self.live_default else self.default,
            pod_migration_uid=pod.migration_uid,
        )
        if verdict.action is EvictionAction.ALLOW:
            return allow(review.uid)
        if verdict.action is EvictionAction.EVACUATE and not is_dry_run(review):
            await self._mark(vmi, pod.node_name or "")
        log.info("eviction_held", pod=f"{pod.namespace}/{pod.name}", vmi=vmi.key,
                 action=str(verdict.action), message=verdict.message)  # fmt: skip
        return too_many_requests(review.uid, verdict.message)

    async def _mark(self, vmi: VirtualMachineInstance, node: str) -> None:
        """status.evacuationNodeName, at the VMI's version (Conflict: the drain retries)."""
        body = {
            "metadata": {"resourceVersion": vmi.metadata.resource_version},
            "status": {"evacuationNodeName": node},
        }
        async with asyncio.timeout(self.timeout):
            await self.client.patch(
                VMIS, vmi.metadata.name or "", body, namespace=vmi.metadata.namespace,
                subresource="status",
            )  # fmt: skip
        log.info("vmi_marked_for_evacuation", vmi=vmi.key, node=node)

    async def _get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(self.timeout):
                return await self.client.get(resource, name, namespace=namespace)
        except NotFound:
            return None


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
