"""Hotplugged volumes, the controller's half: one attachment pod per hotplugged claim on
the VMI's node, and volumeStatus up to AttachedToNode (KubeVirt's flow).

    sync(vmi, launcher pod): list the VMI's attachment pods, read the claims
        → create a pod for each hotplugged volume without one (pinned to the VMI's node,
          owned by the launcher pod, so it goes with it)
        → delete the pods of volumes removed from the spec once the handler holds
          nothing of them (no Detaching entry left)
        → the volumeStatus entries: Pending (claim missing or not bound), Bound,
          AttachedToNode (its pod runs); the handler's MountedToPod / Ready / Detaching
          kept while they are about the same pod; a dataVolume's volume waits, Pending,
          for its DataVolume to have Succeeded (hotplug_sources.py)

The attachment pod's only volume is the claim, so the kubelet mounts it on the node;
the handler finds it there and bind-mounts its disk into the launcher (handler/hotplug).
Attachment pods are not launcher pods (no informer watches them), so a VMI whose volumes
are on their way is looked at again every `RETRY` seconds, and a new leader lists them
once (`prime`) to know which VMIs still have some.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from controller.config import TemplateConfig
from controller.services.volumes.claims import Claim
from controller.vmi.hotplug_sources import not_ready
from shared import labels, podlayout
from shared.kube import PODS, PVCS, AlreadyExists, DeleteOptions, KubeClient, NotFound
from shared.labels import APP_LABEL, CREATED_BY_LABEL
from shared.launcherpod import LauncherPod, PodPhase
from shared.model import VirtualMachineInstance, Volume
from shared.model.volumes import MemoryDumpVolumeSource, PersistentVolumeClaimSource
from shared.model.volumestatus import (
    MEMORY_DUMP_PHASES,
    DomainMemoryDumpInfo,
    HotplugVolumeStatus,
    PersistentVolumeClaimInfo,
    VolumePhase,
    VolumeReason,
    VolumeStatus,
)

log = structlog.get_logger("controller.vmi.hotplug")

RETRY = 2.0
CALL_TIMEOUT = 10.0
SLEEP_FOREVER = "2147483647"
HANDLER_PHASES = frozenset(
    {VolumePhase.MOUNTED_TO_POD, VolumePhase.READY, VolumePhase.DETACHING, *MEMORY_DUMP_PHASES}
)
# Phases in which a volume needs nothing more of this controller.
SETTLED = frozenset(
    {VolumePhase.READY, VolumePhase.MEMORY_DUMP_COMPLETED, VolumePhase.MEMORY_DUMP_FAILED}
)


def _claim_volume(source: PersistentVolumeClaimSource) -> dict[str, Any]:
    ref: dict[str, Any] = {"claimName": source.claim_name or ""}
    if source.read_only:
        ref["readOnly"] = True
    return {"persistentVolumeClaim": ref}


def _dump_volume(source: MemoryDumpVolumeSource) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": source.claim_name or ""}}


# The attachment pod's volume per hotpluggable source (keyed by the model's typed source).
POD_VOLUMES: Mapping[type[Any], Callable[[Any], dict[str, Any]]] = {
    PersistentVolumeClaimSource: _claim_volume,
    MemoryDumpVolumeSource: _dump_volume,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AttachPod:
    """An attachment pod, as this controller decides by."""

    name: str
    uid: str
    volume: str
    phase: str
    node: str | None
    deleting: bool

    @classmethod
    def from_dict(cls, pod: Mapping[str, Any]) -> AttachPod:
        meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            volume=str(
                (meta.get("annotations") or {}).get(labels.ATTACHMENT_VOLUME_ANNOTATION, "")
            ),
            phase=str(status.get("phase") or PodPhase.PENDING),
            node=spec.get("nodeName"),
            deleting=bool(meta.get("deletionTimestamp")),
        )

    @property
    def ended(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


def hotplugged(vmi: VirtualMachineInstance) -> dict[str, Volume]:
    """The VMI's hotplugged volumes by name, in spec order."""
    return {v.name: v for v in vmi.spec.volumes if v.name and v.is_hotplug}


def attachment_pod(
    vmi: VirtualMachineInstance,
    volume: Volume,
    *,
    owner: LauncherPod,
    config: TemplateConfig,
    block: bool = False,
) -> dict[str, Any]:
    """The pod that makes the kubelet mount `volume`'s claim on the VMI's node (map its
    device, for a Block claim)."""
    name = volume.name or ""
    source = volume.source()
    render = POD_VOLUMES[type(source)]
    on_node = {"key": "metadata.name", "operator": "In", "values": [vmi.status.node_name or ""]}
    required = {"nodeSelectorTerms": [{"matchFields": [on_node]}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": podlayout.attachment_pod_name(vmi.uid, name),
            "namespace": vmi.namespace,
            "labels": {APP_LABEL: podlayout.ATTACHMENT_APP, CREATED_BY_LABEL: vmi.uid},
            "annotations": {labels.ATTACHMENT_VOLUME_ANNOTATION: name},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": True,
                },
            ],
        },
        "spec": {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
            },
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "containers": [_attachment_container(name, config, block=block)],
            "volumes": [{"name": "hotplug-disk", **render(source)}],
        },
    }


def _attachment_container(volume: str, config: TemplateConfig, *, block: bool) -> dict[str, Any]:
    """A container that only sleeps with the volume mounted, or its device mapped
    (busybox from the launcher image)."""
    container: dict[str, Any] = {
        "name": podlayout.ATTACHMENT_CONTAINER,
        "image": config.launcher_image,
        "imagePullPolicy": config.image_pull_policy,
        "command": [podlayout.LAUNCHER_BUSYBOX, "sleep", SLEEP_FOREVER],
        "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
    }
    where = f"{podlayout.ATTACHMENT_MOUNT_DIR}/{volume}"
    if block:
        container["volumeDevices"] = [{"name": "hotplug-disk", "devicePath": where}]
    else:
        container["volumeMounts"] = [{"name": "hotplug-disk", "mountPath": where}]
    return container


def plan_volume_status(
    vmi: VirtualMachineInstance,
    pods: Mapping[str, AttachPod],
    claims: Mapping[str, Claim | None],
    waiting: Mapping[str, str] | None = None,
) -> tuple[VolumeStatus, ...]:
    """volumeStatus as the controller wants it (see the top of this module); a volume in
    `waiting` (its DataVolume not Succeeded yet: hotplug_sources) is Pending, saying why."""
    wanted = hotplugged(vmi)
    out = []
    for entry in vmi.status.volume_status:
        name = entry.name or ""
        if entry.hotplug_volume is None and name not in wanted:
            out.append(entry)  # a volume the pod was made with
        elif name not in wanted and entry.phase in HANDLER_PHASES:
            out.append(dataclasses.replace(
                entry, phase=VolumePhase.DETACHING, reason=VolumeReason.DETACHING,
                message=entry.message if entry.phase is VolumePhase.DETACHING
                else f"Volume {name} is being detached",
            ))  # fmt: skip
    for name, volume in wanted.items():
        old = vmi.status.volume_state(name)
        pod = pods.get(name)
        if (
            old is not None
            and old.phase in HANDLER_PHASES
            and pod
            and old.attach_pod_uid == pod.uid
        ):
            out.append(old)
            continue
        claim_name = volume.hotplug_claim or ""
        why = (waiting or {}).get(name)
        if why is not None and pod is None:
            out.append(VolumeStatus(
                name=name, phase=VolumePhase.PENDING, reason=VolumeReason.PVC_NOT_READY,
                message=why,
            ))  # fmt: skip
            continue
        entry = _entry(vmi, name, claim_name, claims.get(claim_name), pod)
        if volume.memory_dump is not None:
            info = DomainMemoryDumpInfo(claim_name=claim_name)
            entry = dataclasses.replace(entry, memory_dump_volume=info)
        out.append(entry)
    return tuple(out)


def _entry(
    vmi: VirtualMachineInstance,
    name: str,
    claim_name: str,
    claim: Claim | None,
    pod: AttachPod | None,
) -> VolumeStatus:
    hotplug = HotplugVolumeStatus(attach_pod_name=pod.name, attach_pod_uid=pod.uid) if pod else None
    info = None
    if claim is None:
        phase, reason = VolumePhase.PENDING, VolumeReason.PVC_NOT_READY
        message = f"PVC {vmi.namespace}/{claim_name} does not exist"
    else:
        info = PersistentVolumeClaimInfo(
            volume_mode=claim.volume_mode,
            capacity={"storage": str(claim.capacity_bytes)} if claim.capacity_bytes else {},
            requests={"storage": str(claim.request_bytes)} if claim.request_bytes else {},
        )
        running = pod is not None and pod.phase == PodPhase.RUNNING and not pod.deleting
        if running:
            phase, reason = VolumePhase.ATTACHED_TO_NODE, VolumeReason.SUCCESSFUL_CREATE
            message = f"Created hotplug attachment pod {pod.name if pod else ''}, for volume {name}"
        elif claim.phase == "Bound":
            phase, reason, message = (
                VolumePhase.BOUND,
                VolumeReason.SUCCESSFUL_CREATE,
                f"PVC {claim_name} is bound",
            )
        else:
            phase, reason = VolumePhase.PENDING, VolumeReason.PVC_NOT_READY
            message = f"PVC {vmi.namespace}/{claim_name} is not bound ({claim.phase})"
    return VolumeStatus(
        name=name, phase=phase, reason=reason, message=message,
        hotplug_volume=hotplug, persistent_volume_claim_info=info,
    )  # fmt: skip


def stale_pods(
    vmi: VirtualMachineInstance, pods: Sequence[AttachPod], status: Sequence[VolumeStatus]
) -> list[AttachPod]:
    """Pods to delete: ended ones, and those of removed volumes the handler let go of."""
    wanted, held = hotplugged(vmi), {e.name for e in status if e.phase in HANDLER_PHASES}
    return [
        p for p in pods
        if not p.deleting and (p.ended or (p.volume not in wanted and p.volume not in held))
    ]  # fmt: skip


class HotplugAttachments:
    """The I/O around the pure planning above (the controller's own credentials)."""

    def __init__(self, client: KubeClient, config: TemplateConfig) -> None:
        self._client = client
        self._config = config
        # VMIs (by UID) whose attachment pods this controller saw last: looked at again
        # until none is left, though neither spec nor status names a hotplug any more.
        self._holding: set[str] = set()

    def holding(self, vmi_uid: str) -> bool:
        return vmi_uid in self._holding

    def forget(self, vmi_uid: str) -> None:
        """The VMI is gone (its pods go with its launcher pod)."""
        self._holding.discard(vmi_uid)

    async def prime(self, namespace: str | None) -> None:
        """A new leader remembers nothing: the VMIs that still have attachment pods (one
        LIST) are held, so a pod whose volume was removed while no controller ran is
        deleted on their first sync instead of waiting for its launcher pod to go."""
        selector = f"{APP_LABEL}={podlayout.ATTACHMENT_APP}"
        async with asyncio.timeout(CALL_TIMEOUT):
            found = await self._client.list_all(PODS, namespace=namespace, label_selector=selector)
        for pod in found.items:
            uid = (pod["metadata"].get("labels") or {}).get(CREATED_BY_LABEL)
            if uid:
                self._holding.add(str(uid))

    async def sync(
        self, vmi: VirtualMachineInstance, owner: LauncherPod
    ) -> tuple[tuple[VolumeStatus, ...], float | None]:
        """The volumeStatus wanted, and when to look again (None: all settled)."""
        pods = await self._pods(vmi)
        claims = await self._claims(vmi)
        by_volume = {p.volume: p for p in pods if not p.deleting and not p.ended}
        waiting = await not_ready(self._client, vmi, hotplugged(vmi))
        for name, volume in hotplugged(vmi).items():
            claim = claims.get(_claim_of(volume))
            if name not in by_volume and claim is not None and name not in waiting:
                body = attachment_pod(
                    vmi, volume, owner=owner, config=self._config, block=claim.block
                )
                by_volume[name] = await self._create(body)
        status = plan_volume_status(vmi, by_volume, claims, waiting)
        stale = stale_pods(vmi, pods, status)
        for pod in stale:
            await self._delete(vmi, pod)
        if by_volume or stale:
            self._holding.add(vmi.uid)
        else:
            self._holding.discard(vmi.uid)
        wanted = hotplugged(vmi)
        settled = not stale and all(
            e.phase in SETTLED for e in status if e.hotplug_volume is not None or e.name in wanted
        )
        return status, None if settled else RETRY

    async def _pods(self, vmi: VirtualMachineInstance) -> list[AttachPod]:
        selector = f"{APP_LABEL}={podlayout.ATTACHMENT_APP},{CREATED_BY_LABEL}={vmi.uid}"
        async with asyncio.timeout(CALL_TIMEOUT):
            found = await self._client.list(PODS, namespace=vmi.namespace, label_selector=selector)
        return [AttachPod.from_dict(p) for p in found.items]

    async def _claims(self, vmi: VirtualMachineInstance) -> dict[str, Claim | None]:
        claims: dict[str, Claim | None] = {}
        for volume in hotplugged(vmi).values():
            name = _claim_of(volume)
            try:
                async with asyncio.timeout(CALL_TIMEOUT):
                    claims[name] = Claim.from_dict(
                        await self._client.get(PVCS, name, namespace=vmi.namespace)
                    )
            except NotFound:
                claims[name] = None
        return claims

    async def _create(self, pod: dict[str, Any]) -> AttachPod:
        ns = pod["metadata"]["namespace"]
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                made = await self._client.create(PODS, pod, namespace=ns)
        except AlreadyExists:
            async with asyncio.timeout(CALL_TIMEOUT):
                made = await self._client.get(PODS, pod["metadata"]["name"], namespace=ns)
        log.info("attachment_pod_created", pod=pod["metadata"]["name"])
        return AttachPod.from_dict(made)

    async def _delete(self, vmi: VirtualMachineInstance, pod: AttachPod) -> None:
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                await self._client.delete(
                    PODS,
                    pod.name,
                    namespace=vmi.namespace,
                    options=DeleteOptions(grace_period_seconds=0),
                )
        except NotFound:
            return
        log.info("attachment_pod_deleted", pod=pod.name, volume=pod.volume)


def _claim_of(volume: Volume) -> str:
    return volume.hotplug_claim or ""
