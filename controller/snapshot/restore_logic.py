"""What a VirtualMachineRestore needs (pure): the restored claims and the restored VM.

KubeVirt's design, simplified where noted (docs/snapshots.md):
- every volume backup of the snapshot's content becomes a claim made from its VolumeSnapshot
  (`dataSource`), named by volumeRestorePolicy: RandomizeNames (the default,
  `restore-<restore uid>-<volume>`), PrefixTargetName (`<target>-<volume>`) or InPlace (the
  original claim's name: the old claim is deleted first);
- the target VM gets the snapshot's spec with those claims as `persistentVolumeClaim`
  volumes (dataVolume volumes and their dataVolumeTemplates become plain claims); an
  existing target keeps its own runStrategy (a stopped VM stays stopped), a new one is made
  with the snapshot's, and `patches` (JSON patches, as KubeVirt's) apply to a new VM;
- the restored claims belong to the target VM (volumeOwnershipPolicy Vm) or to nobody.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from controller.snapshot.logic import CLAIM_SPEC_KEEP, owner_ref
from shared.model import VirtualMachine
from shared.model.snapshot import (
    VirtualMachineRestore,
    VirtualMachineSnapshotContent,
    VolumeBackup,
    VolumeRestore,
    VolumeRestorePolicy,
)
from shared.naming import fit

RESTORE_ANNOTATION = "restore.kubevirt.io/lastRestoreUID"
CLAIM_RESTORE_ANNOTATION = "restore.kubevirt.io/name"
VOLUME_SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


class PatchError(ValueError):
    """A patch of spec.patches that does not apply."""


def restore_marker(restore: VirtualMachineRestore) -> str:
    """The annotation value a VM restored by this restore carries."""
    return f"{restore.name}-{restore.uid}"


def claim_name(restore: VirtualMachineRestore, backup: VolumeBackup) -> str:
    """The restored claim's name for one volume backup."""
    policy = restore.spec.volume_restore_policy or VolumeRestorePolicy.RANDOMIZE_NAMES
    volume = backup.volume_name or ""
    if policy is VolumeRestorePolicy.IN_PLACE:
        return backup.persistent_volume_claim.metadata.name or volume
    if policy is VolumeRestorePolicy.PREFIX_TARGET_NAME:
        return fit(f"{restore.spec.target.name}-{volume}")
    return fit(f"restore-{restore.uid}-{volume}")


def restores_of(
    restore: VirtualMachineRestore, content: VirtualMachineSnapshotContent
) -> tuple[VolumeRestore, ...]:
    """status.restores: one entry per volume backup."""
    return tuple(
        VolumeRestore(
            volume_name=b.volume_name,
            persistent_volume_claim=claim_name(restore, b),
            volume_snapshot_name=b.volume_snapshot_name,
        )
        for b in content.spec.volume_backups
    )


def spec_from_snapshot(backup: VolumeBackup) -> dict[str, Any]:
    """A claim spec as the backed-up claim's, its data from the backup's VolumeSnapshot."""
    spec_raw = backup.persistent_volume_claim.extra.get("spec") or {}
    spec = {k: copy.deepcopy(spec_raw[k]) for k in CLAIM_SPEC_KEEP if k in spec_raw}
    spec["dataSource"] = {
        "apiGroup": VOLUME_SNAPSHOT_GROUP,
        "kind": "VolumeSnapshot",
        "name": backup.volume_snapshot_name,
    }
    return spec


def claim_body(restore: VirtualMachineRestore, backup: VolumeBackup) -> dict[str, Any]:
    """The claim made from the backup's VolumeSnapshot, owned by the restore until the VM
    takes it over."""
    spec = spec_from_snapshot(backup)
    labels = dict(backup.persistent_volume_claim.metadata.labels)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim_name(restore, backup),
            "namespace": restore.namespace,
            **({"labels": labels} if labels else {}),
            "annotations": {CLAIM_RESTORE_ANNOTATION: restore.name},
            "ownerReferences": [owner_ref(restore, controller=False)],
        },
        "spec": spec,
    }


def restored_spec(
    content: VirtualMachineSnapshotContent,
    restore: VirtualMachineRestore,
    *,
    current: VirtualMachine | None,
) -> dict[str, Any]:
    """The target's spec: the snapshot's, its claim volumes pointing at the restored claims."""
    source = content.spec.source.virtual_machine
    spec = copy.deepcopy(source.spec.to_dict()) if source is not None else {}
    names = {r.volume_name: r.persistent_volume_claim for r in restores_of(restore, content)}
    template = spec.setdefault("template", {}).setdefault("spec", {})
    replaced: set[str] = set()
    for volume in template.get("volumes") or []:
        new = names.get(volume.get("name"))
        if new is None:
            continue
        if "dataVolume" in volume:
            replaced.add(str(volume["dataVolume"].get("name")))
            volume.pop("dataVolume")
        volume["persistentVolumeClaim"] = {"claimName": new}
    templates = [
        t
        for t in spec.get("dataVolumeTemplates") or []
        if (t.get("metadata") or {}).get("name") not in replaced
    ]
    if templates:
        spec["dataVolumeTemplates"] = templates
    else:
        spec.pop("dataVolumeTemplates", None)
    if current is not None:
        spec.pop("running", None)
        spec.pop("runStrategy", None)
        if current.spec.run_strategy is not None:
            spec["runStrategy"] = str(current.spec.run_strategy)
        if current.spec.running is not None:
            spec["running"] = current.spec.running
    return spec


def new_vm_body(
    content: VirtualMachineSnapshotContent, restore: VirtualMachineRestore, spec: dict[str, Any]
) -> dict[str, Any]:
    """A new target VM (its labels and annotations from the snapshotted VM), patched."""
    source = content.spec.source.virtual_machine
    meta = source.metadata if source is not None else None
    body: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": restore.spec.target.name,
            "namespace": restore.namespace,
            "labels": dict(meta.labels) if meta is not None else {},
            "annotations": {
                **(dict(meta.annotations) if meta is not None else {}),
                RESTORE_ANNOTATION: restore_marker(restore),
            },
        },
        "spec": spec,
    }
    return apply_patches(body, patches_of(restore))


def patches_of(restore: VirtualMachineRestore) -> list[str]:
    raw = restore.spec.extra.get("patches") or []
    return [str(p) for p in raw] if isinstance(raw, list) else []


def apply_patches(obj: dict[str, Any], patches: Sequence[str]) -> dict[str, Any]:
    """RFC 6902 add / replace / remove, each patch a JSON object or list of them (KubeVirt's
    `patches` strings); PatchError names the one that does not apply."""
    out = copy.deepcopy(obj)
    for text in patches:
        try:
            ops = json.loads(text)
        except json.JSONDecodeError as e:
            raise PatchError(f"patch {text!r} is not JSON: {e}") from e
        for op in ops if isinstance(ops, list) else [ops]:
            _apply_op(out, op, text)
    return out


def _apply_op(obj: dict[str, Any], op: Mapping[str, Any], text: str) -> None:
    kind, path = op.get("op"), str(op.get("path") or "")
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
    if kind not in ("add", "replace", "remove") or not parts:
        raise PatchError(f"patch {text!r}: only add, replace and remove of a path are served")
    parent: Any = obj
    try:
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last: Any = parts[-1]
        if isinstance(parent, list):
            last = len(parent) if last == "-" else int(last)
        if kind == "remove":
            del parent[last]
        elif kind == "add" and isinstance(parent, list):
            parent.insert(last, op.get("value"))
        else:
            parent[last] = op.get("value")
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise PatchError(f"patch {text!r}: path {path} does not apply") from e
