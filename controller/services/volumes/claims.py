"""PersistentVolumeClaims a VMI names: read before its launcher pod is made.

A claim that does not exist stops the pod from being made, with a Synchronized=False
condition naming it (reason FailedPvcNotFound; the VM shows ErrorPvcNotFound, as in
KubeVirt), retried with backoff until it appears. A claim that exists but is not bound
yet does not: with WaitForFirstConsumer it binds only once the pod is scheduled. A Lost
claim is refused with its own reason; so is a volumeMode neither Filesystem nor Block.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.errors import SyncError
from shared import vmstate
from shared.kube import DATAVOLUMES, PVCS, KubeClient, NotFound
from shared.model import (
    ConditionReason,
    PersistentVolumeClaimInfo,
    VirtualMachineInstance,
    VolumeStatus,
)
from shared.model.datavolume import DataVolume, DataVolumePhase
from shared.model.errors import QuantityError
from shared.model.memorydump import PVC_MEMORY_DUMP_ANNOTATION
from shared.model.quantity import parse_bytes
from shared.upload import UPLOAD_TARGET_ANNOTATION

GET_TIMEOUT = 10.0
BLOCK_MODE = "Block"
VOLUME_MODES = ("Filesystem", BLOCK_MODE)


class ClaimReason(StrEnum):
    """Synchronized=False reasons of claims a VMI cannot use (yet)."""

    NOT_FOUND = str(ConditionReason.FAILED_PVC_NOT_FOUND)
    LOST = "FailedPvcLost"
    UNSUPPORTED = "FailedPvcUnsupported"
    DATAVOLUME_NOT_READY = "DataVolumeNotReady"
    DATAVOLUME_FAILED = "DataVolumeFailed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The parts of a PVC the launcher pod depends on."""

    name: str
    phase: str
    volume_mode: str
    namespace: str = ""
    request_bytes: int | None
    capacity_bytes: int | None
    access_modes: tuple[str, ...] = ()  # the bound volume's (status), empty until bound
    requests: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    # CDI's upload target annotation on a claim no DataVolume controls (image-upload pvc:
    # controller/uploadclaim/).
    upload_target: bool = False
    # KubeVirt's kubevirt.io/memory-dump annotation: the dump's file name on the claim.
    memory_dump: str | None = None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Claim:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        capacity = (status.get("capacity") or {}).get("storage")
        meta = obj.get("metadata") or {}
        return cls(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace") or ""),
            phase=str(status.get("phase") or "Pending"),
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            request_bytes=_bytes(request),
            capacity_bytes=_bytes(capacity),
            access_modes=tuple(str(m) for m in status.get("accessModes") or ()),
            requests=_strings((spec.get("resources") or {}).get("requests")),
            capacity=_strings(status.get("capacity")),
            upload_target=_upload_target(meta),
            memory_dump=(meta.get("annotations") or {}).get(PVC_MEMORY_DUMP_ANNOTATION),
        )

    def info(self) -> PersistentVolumeClaimInfo:
        """The VMI's status.volumeStatus[].persistentVolumeClaimInfo of this claim."""
        return PersistentVolumeClaimInfo(
            claim_name=self.name,
            access_modes=self.access_modes,
            volume_mode=self.volume_mode,
            capacity=self.capacity,
            requests=self.requests,
        )

    @property
    def block(self) -> bool:
        return self.volume_mode == BLOCK_MODE

    @property
    def disk_bytes(self) -> int | None:
        """The size of a disk.img made on the claim: its capacity once bound, else its request."""
        return self.capacity_bytes or self.request_bytes


def _upload_target(meta: Mapping[str, Any]) -> bool:
    """Annotated as CDI's upload target, and controlled by no DataVolume."""
    if UPLOAD_TARGET_ANNOTATION not in (meta.get("annotations") or {}):
        return False
    refs = meta.get("ownerReferences") or ()
    return not any(r.get("kind") == "DataVolume" and r.get("controller") for r in refs)


def _strings(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _bytes(value: object) -> int | None:
    if not isinstance(value, str | int):
        return None
    try:
        return parse_bytes(value)
    except QuantityError:
        return None


def claim_names(vmi: VirtualMachineInstance, *, hotplugged: bool = False) -> tuple[str, ...]:
    """The claims the VMI's launcher pod mounts, in order, each once (hotplugged ones are
    their attachment pods' business: listed too with ``hotplugged``)."""
    names = [
        v.claim.claim_name
        for v in vmi.spec.volumes
        if v.claim is not None and v.claim.claim_name and (hotplugged or not v.is_hotplug)
    ]
    names += [  # an ephemeral volume's claim: mounted read-only, under the launcher's overlay
        v.ephemeral.persistent_volume_claim.claim_name
        for v in vmi.spec.volumes
        if v.ephemeral is not None
        and v.ephemeral.persistent_volume_claim is not None
        and v.ephemeral.persistent_volume_claim.claim_name
    ]
    return tuple(dict.fromkeys(names))


async def read_claims(client: KubeClient, vmi: VirtualMachineInstance) -> dict[str, Claim]:
    """Every claim the VMI names, by name; SyncError naming the first unusable one."""
    await check_datavolumes(client, vmi)
    claims: dict[str, Claim] = {}
    for name in claim_names(vmi):
        try:
            async with asyncio.timeout(GET_TIMEOUT):
                raw = await client.get(PVCS, name, namespace=vmi.namespace)
        except NotFound:
            raise SyncError(
                ClaimReason.NOT_FOUND,
                f"PVC {vmi.namespace}/{name} does not exist, waiting for it to appear",
            ) from None
        claim = Claim.from_dict(raw)
        check_claim(claim, namespace=vmi.namespace or "")
        claims[name] = claim
    return claims


async def unbound_claims(client: KubeClient, vmi: VirtualMachineInstance) -> list[str]:
    """ "PVC ns/name is not bound (Pending)" for each claim of the VMI not Bound (or gone)."""
    found = []
    for name in claim_names(vmi):
        try:
            async with asyncio.timeout(GET_TIMEOUT):
                phase = Claim.from_dict(await client.get(PVCS, name, namespace=vmi.namespace)).phase
        except NotFound:
            phase = "not found"
        if phase != "Bound":
            found.append(f"PVC {vmi.namespace}/{name} is not bound ({phase})")
    return found


async def check_datavolumes(client: KubeClient, vmi: VirtualMachineInstance) -> None:
    """The launcher pod waits for every dataVolume volume's DataVolume to have Succeeded
    (its claim holds the imported disk only then); a Failed one is said with its reason."""
    for volume in vmi.spec.volumes:
        ref = volume.data_volume
        if ref is None or not ref.name or volume.is_hotplug:
            continue
        where = f"DataVolume {vmi.namespace}/{ref.name}"
        try:
            async with asyncio.timeout(GET_TIMEOUT):
                dv = DataVolume.from_dict(
                    await client.get(DATAVOLUMES, ref.name, namespace=vmi.namespace)
                )
        except NotFound:
            raise SyncError(
                ClaimReason.DATAVOLUME_NOT_READY, f"{where} does not exist, waiting for it"
            ) from None
        failure = dv.failure()
        if failure is not None:
            raise SyncError(ClaimReason.DATAVOLUME_FAILED, f"{where} failed: {failure}")
        if dv.phase != DataVolumePhase.SUCCEEDED:
            raise SyncError(
                ClaimReason.DATAVOLUME_NOT_READY,
                f"{where} is not ready ({dv.phase or 'Pending'} {dv.status.progress or ''})",
            )


def check_claim(claim: Claim, *, namespace: str) -> None:
    """Refuse a Lost claim and one of an unknown volumeMode (with why)."""
    where = f"PVC {namespace}/{claim.name}"
    if claim.phase == "Lost":
        raise SyncError(ClaimReason.LOST, f"{where} is Lost: its volume is gone")
    if claim.volume_mode not in VOLUME_MODES:
        raise SyncError(
            ClaimReason.UNSUPPORTED,
            f"{where} has volumeMode {claim.volume_mode}: only Filesystem (a disk.img in "
            "the volume) and Block (the device itself) claims are supported",
            requeue=False,
        )


async def claim_volume_status(
    client: KubeClient, vmi: VirtualMachineInstance, current: tuple[VolumeStatus, ...]
) -> tuple[VolumeStatus, ...] | None:
    """status.volumeStatus with each claim volume's persistentVolumeClaimInfo, for a VMI
    whose claims are bound but not yet described there (as KubeVirt's controller fills it:
    the handler's LiveMigratable reads the access modes); None when nothing is to add.
    A claim gone or not bound yet is left out (a later sync adds it). ``current`` is the
    volumeStatus this sync has planned so far (hotplug's entries included)."""
    wanted = [
        (v.name or "", v.claim.claim_name)
        for v in vmi.spec.volumes
        if v.claim is not None
        and v.claim.claim_name
        and _lacks_info(current, v.name or "", v.claim.claim_name)
    ]
    # The persistent-state claim, under its own name, as KubeVirt lists it (shared/vmstate.py).
    if (state := vmstate.vmi_claim(vmi)) is not None and _lacks_info(current, state, state):
        wanted.append((state, state))
    added: dict[str, VolumeStatus] = {}
    for volume, claim_name in wanted:
        try:
            async with asyncio.timeout(GET_TIMEOUT):
                raw = await client.get(PVCS, claim_name or "", namespace=vmi.namespace)
        except NotFound:
            continue
        claim = Claim.from_dict(raw)
        if claim.phase == "Bound" and claim.access_modes:
            old = _entry(current, volume) or VolumeStatus(name=volume, target="")
            added[volume] = dataclasses.replace(old, persistent_volume_claim_info=claim.info())
    if not added:
        return None
    kept = tuple(v for v in current if v.name not in added)
    return kept + tuple(added.values())


def _entry(current: tuple[VolumeStatus, ...], volume: str) -> VolumeStatus | None:
    return next((v for v in current if v.name == volume), None)


def _lacks_info(current: tuple[VolumeStatus, ...], volume: str, claim: str) -> bool:
    """No info yet, or another claim's (a volume migration moved the volume)."""
    status = _entry(current, volume)
    info = status.persistent_volume_claim_info if status is not None else None
    return info is None or info.claim_name != claim


def resized_claims(
    current: tuple[VolumeStatus, ...], claim_of: Callable[[str], Claim | None]
) -> tuple[VolumeStatus, ...] | None:
    """status.volumeStatus whose persistentVolumeClaimInfo follows its bound claim's
    capacity and requests (an expanded claim: with ExpandDisks the handler grows the disk
    under the guest); None when none changed. ``claim_of`` reads a claim by name (the
    informer's cache)."""
    changed, out = False, []
    for entry in current:
        info = entry.persistent_volume_claim_info
        claim = claim_of(info.claim_name) if info is not None and info.claim_name else None
        if (
            info is None
            or claim is None
            or claim.phase != "Bound"
            or (dict(claim.capacity), dict(claim.requests))
            == (dict(info.capacity), dict(info.requests))
        ):
            out.append(entry)
            continue
        resized = dataclasses.replace(info, capacity=claim.capacity, requests=claim.requests)
        out.append(dataclasses.replace(entry, persistent_volume_claim_info=resized))
        changed = True
    return tuple(out) if changed else None
