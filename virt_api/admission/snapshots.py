"""Admission of snapshot.kubevirt.io objects (KubeVirt's snapshot and restore admitters):
refusals naming the field, at the earliest layer.

- VirtualMachineSnapshot: the source is a kubevirt.io VirtualMachine with a name, and it
  exists (on CREATE); failureDeadline is a Go duration; the spec never changes.
- VirtualMachineClone: the source is a VirtualMachine or VirtualMachineSnapshot that
  exists (on CREATE), the target a VirtualMachine; MAC addresses; patches as below.
- VirtualMachineRestore: the target is a kubevirt.io VirtualMachine with a name; the
  snapshot is named, exists and is readyToUse (on CREATE); a running target is refused
  unless targetReadinessPolicy says to stop it or wait (StopTarget, WaitGracePeriod,
  WaitEventually); patches are JSON add/replace/remove operations;
  volumeRestoreOverrides is not served; the spec never changes.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from shared.duration import go_duration
from shared.kube import VMIS, VMS, VMSNAPSHOTS, Resource
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import Gets
from shared.model import FieldError
from shared.model.clone import SNAPSHOT_KIND, VirtualMachineClone
from shared.model.snapshot import (
    VM_KIND,
    LocalObjectRef,
    TargetReadinessPolicy,
    VirtualMachineRestore,
    VirtualMachineSnapshot,
)
from shared.model.validation import ValidationLimits

PATCH_OPS = ("add", "replace", "remove")
SNAPSHOT_KINDS = (VirtualMachineSnapshot.KIND, VirtualMachineRestore.KIND, VirtualMachineClone.KIND)
# Colons or dashes (Go's net.ParseMAC; `virtctl create clone --new-mac-address` needs dashes).
_MAC = re.compile(r"[0-9a-fA-F]{2}([:-])[0-9a-fA-F]{2}(\1[0-9a-fA-F]{2}){4}")


class ObjectLookup(Protocol):
    """Reads one object's wire dict; None when it does not exist."""

    async def __call__(
        self, resource: Resource, namespace: str, name: str
    ) -> Mapping[str, Any] | None: ...


def object_lookup(client: Gets, *, timeout: float) -> ObjectLookup:
    """ObjectLookup over a KubeClient: None on NotFound, other errors propagate."""

    async def lookup(resource: Resource, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            async with asyncio.timeout(timeout):
                return await client.get(resource, name, namespace=namespace)
        except KubeNotFound:
            return None

    return lookup


def _vm_ref_errors(ref: LocalObjectRef, path: str, what: str) -> list[FieldError]:
    errors = []
    if not ref.is_vm():
        message = f"only a kubevirt.io VirtualMachine can be {what}"
        errors.append(FieldError(path=f"{path}.kind", message=message, value=ref.kind))
    if not ref.name:
        errors.append(FieldError(path=f"{path}.name", message="required"))
    return errors


def validate_snapshot(snap: VirtualMachineSnapshot, _: ValidationLimits) -> list[FieldError]:
    """The source and failureDeadline."""
    errors = _vm_ref_errors(snap.spec.source, "spec.source", "snapshotted")
    deadline = snap.spec.failure_deadline
    if deadline is not None:
        try:
            go_duration(deadline)
        except ValueError as e:
            errors.append(FieldError(path="spec.failureDeadline", message=str(e), value=deadline))
    return errors


def validate_restore(restore: VirtualMachineRestore, _: ValidationLimits) -> list[FieldError]:
    """The target, the snapshot's name, the patches; no volumeRestoreOverrides."""
    errors = _vm_ref_errors(restore.spec.target, "spec.target", "restored")
    if not restore.spec.virtual_machine_snapshot_name:
        errors.append(FieldError(path="spec.virtualMachineSnapshotName", message="required"))
    if restore.spec.extra.get("volumeRestoreOverrides"):
        errors.append(
            FieldError(path="spec.volumeRestoreOverrides", message="not supported by kubevirt-py")
        )
    patches = restore.spec.extra.get("patches") or []
    for i, text in enumerate(patches if isinstance(patches, list) else [patches]):
        why = _patch_problem(text)
        if why:
            errors.append(FieldError(path=f"spec.patches[{i}]", message=why, value=text))
    return errors


def validate_clone(clone: VirtualMachineClone, _: ValidationLimits) -> list[FieldError]:
    """A VM or snapshot source with a name, a VM target, MAC addresses, patches."""
    errors = []
    source = clone.spec.source
    if source is None or source.kind not in (VM_KIND, SNAPSHOT_KIND) or not source.name:
        errors.append(
            FieldError(
                path="spec.source",
                message="a VirtualMachine or VirtualMachineSnapshot with a name is required",
            )
        )
    target = clone.spec.target
    if target is not None and (not target.is_vm() or not target.name):
        errors.append(FieldError(path="spec.target", message="a VirtualMachine with a name"))
    for name, mac in clone.spec.new_mac_addresses.items():
        if not _MAC.fullmatch(mac):
            errors.append(
                FieldError(
                    path=f"spec.newMacAddresses.{name}",
                    message="a MAC address such as 02:00:00:00:00:01",
                    value=mac,
                )
            )
    for i, text in enumerate(clone.spec.patches):
        why = _patch_problem(text)
        if why:
            errors.append(FieldError(path=f"spec.patches[{i}]", message=why, value=text))
    return errors


def _patch_problem(text: object) -> str:
    if not isinstance(text, str):
        return "a JSON patch string"
    try:
        ops = json.loads(text)
    except json.JSONDecodeError as e:
        return f"not JSON: {e}"
    for op in ops if isinstance(ops, list) else [ops]:
        if not isinstance(op, dict) or op.get("op") not in PATCH_OPS:
            return "only add, replace and remove operations are served"
        if not str(op.get("path") or "").startswith("/"):
            return "path: a JSON pointer such as /spec/runStrategy"
    return ""


def spec_changed(
    kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[FieldError]:
    """KubeVirt's snapshots and restores are immutable once made."""
    if kind in SNAPSHOT_KINDS and old is not None and obj.get("spec") != old.get("spec"):
        return [FieldError(path="spec", message="cannot be changed once created")]
    return []


async def lookup_errors(
    kind: str, obj: Mapping[str, Any], *, namespace: str, lookup: ObjectLookup
) -> list[FieldError]:
    """What a new snapshot or restore needs to exist: its VM, its ready snapshot, a
    stopped target (or a policy that stops it or waits)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return []
    if kind == VirtualMachineSnapshot.KIND:
        name = (spec.get("source") or {}).get("name")
        if isinstance(name, str) and name and await lookup(VMS, namespace, name) is None:
            return [_missing("spec.source.name", "VirtualMachine", name, namespace)]
        return []
    if kind == VirtualMachineClone.KIND:
        return await _clone_source_errors(spec, namespace, lookup)
    if kind != VirtualMachineRestore.KIND:
        return []
    return [
        *await _restore_snapshot_errors(spec, namespace, lookup),
        *await _restore_target_errors(spec, namespace, lookup),
    ]


async def _restore_snapshot_errors(
    spec: Mapping[str, Any], namespace: str, lookup: ObjectLookup
) -> list[FieldError]:
    """A restore's snapshot exists and is ready to use."""
    snap_name = spec.get("virtualMachineSnapshotName")
    if not isinstance(snap_name, str) or not snap_name:
        return []
    snap = await lookup(VMSNAPSHOTS, namespace, snap_name)
    if snap is None:
        path = "spec.virtualMachineSnapshotName"
        return [_missing(path, "VirtualMachineSnapshot", snap_name, namespace)]
    if (snap.get("status") or {}).get("readyToUse") is not True:
        return [
            FieldError(
                path="spec.virtualMachineSnapshotName",
                message=f"VirtualMachineSnapshot {snap_name!r} is not ready to use",
                value=snap_name,
            )
        ]
    return []


async def _restore_target_errors(
    spec: Mapping[str, Any], namespace: str, lookup: ObjectLookup
) -> list[FieldError]:
    """A running target is refused unless the policy stops it or waits for it."""
    target = (spec.get("target") or {}).get("name")
    policy = spec.get("targetReadinessPolicy")
    stops_or_waits = policy in (
        TargetReadinessPolicy.STOP_TARGET,
        TargetReadinessPolicy.WAIT_GRACE_PERIOD,
        TargetReadinessPolicy.WAIT_EVENTUALLY,
    )
    asks = isinstance(target, str) and target and not stops_or_waits
    if asks and await lookup(VMIS, namespace, str(target)) is not None:
        return [
            FieldError(
                path="spec.targetReadinessPolicy",
                message=f"VirtualMachine {target!r} is running: stop it first, or set "
                "StopTarget (stop it), WaitGracePeriod or WaitEventually (wait for it)",
                value=policy,
            )
        ]
    return []


async def _clone_source_errors(
    spec: Mapping[str, Any], namespace: str, lookup: ObjectLookup
) -> list[FieldError]:
    source = spec.get("source") or {}
    name, kind = source.get("name"), source.get("kind")
    resource = VMSNAPSHOTS if kind == SNAPSHOT_KIND else VMS
    if isinstance(name, str) and name and await lookup(resource, namespace, name) is None:
        return [_missing("spec.source.name", str(kind), name, namespace)]
    return []


def _missing(path: str, kind: str, name: str, namespace: str) -> FieldError:
    return FieldError(
        path=path, message=f"{kind} {name!r} does not exist in namespace {namespace!r}", value=name
    )
