"""PersistentVolumeClaims a VMI names: read before its launcher pod is made.

A claim that does not exist stops the pod from being made, with a Synchronized=False
condition naming it (reason FailedPvcNotFound; the VM shows ErrorPvcNotFound, as in
KubeVirt), retried with backoff until it appears. A claim that exists but is not bound
yet does not: with WaitForFirstConsumer it binds only once the pod is scheduled. A Lost
claim, or a block-mode one (not offered yet), is refused with its own reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.errors import SyncError
from shared.kube import KubeClient, NotFound
from shared.kube.resources import Resource
from shared.model import ConditionReason, VirtualMachineInstance
from shared.model.errors import QuantityError
from shared.model.quantity import parse_bytes

PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
GET_TIMEOUT = 10.0


class ClaimReason(StrEnum):
    """Synchronized=False reasons of claims a VMI cannot use (yet)."""

    NOT_FOUND = str(ConditionReason.FAILED_PVC_NOT_FOUND)
    LOST = "FailedPvcLost"
    UNSUPPORTED = "FailedPvcUnsupported"


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The parts of a PVC the launcher pod depends on."""

    name: str
    phase: str
    volume_mode: str
    request_bytes: int | None
    capacity_bytes: int | None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Claim:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        capacity = (status.get("capacity") or {}).get("storage")
        return cls(
            name=str((obj.get("metadata") or {}).get("name", "")),
            phase=str(status.get("phase") or "Pending"),
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            request_bytes=_bytes(request),
            capacity_bytes=_bytes(capacity),
        )

    @property
    def disk_bytes(self) -> int | None:
        """The size of a disk.img made on the claim: its capacity once bound, else its request."""
        return self.capacity_bytes or self.request_bytes


def _bytes(value: object) -> int | None:
    if not isinstance(value, str | int):
        return None
    try:
        return parse_bytes(value)
    except QuantityError:
        return None


def claim_names(vmi: VirtualMachineInstance) -> tuple[str, ...]:
    """The claims the VMI's launcher pod mounts, in order, each once (hotplugged ones are
    their attachment pods' business)."""
    names = [
        v.persistent_volume_claim.claim_name
        for v in vmi.spec.volumes
        if v.persistent_volume_claim is not None
        and v.persistent_volume_claim.claim_name
        and not v.is_hotplug
    ]
    return tuple(dict.fromkeys(names))


async def read_claims(client: KubeClient, vmi: VirtualMachineInstance) -> dict[str, Claim]:
    """Every claim the VMI names, by name; SyncError naming the first unusable one."""
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


def check_claim(claim: Claim, *, namespace: str) -> None:
    """Refuse a Lost claim and a block-mode one (with why)."""
    where = f"PVC {namespace}/{claim.name}"
    if claim.phase == "Lost":
        raise SyncError(ClaimReason.LOST, f"{where} is Lost: its volume is gone")
    if claim.volume_mode != "Filesystem":
        raise SyncError(
            ClaimReason.UNSUPPORTED,
            f"{where} has volumeMode {claim.volume_mode}: only Filesystem claims "
            "(a disk.img in the volume) are supported; the local storage offers no "
            "block devices",
            requeue=False,
        )
