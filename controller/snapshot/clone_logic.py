"""What a VirtualMachineClone asks of its restore (pure): the names of the temporary
snapshot and restore, and the JSON patches that make the copy its own machine.

KubeVirt's clone: every interface gets the MAC of newMacAddresses or, without one, loses
its pinned MAC (a new one is generated); the firmware's UUID goes (a new one is generated)
and its SMBIOS serial becomes newSMBiosSerial (or goes); labels and annotations of the VM
and of its template are copied as the filters say ("*" all, "!pattern" not these, later
filters winning); the user's patches come last.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from typing import Any

from shared.model.clone import VirtualMachineClone, VolumeNamePolicy
from shared.model.snapshot import VolumeRestorePolicy

TEMPLATE = "/spec/template"
DOMAIN = f"{TEMPLATE}/spec/domain"


def snapshot_name(clone: VirtualMachineClone) -> str:
    return f"tmp-snapshot-{clone.uid}"


def restore_name(clone: VirtualMachineClone) -> str:
    return f"tmp-restore-{clone.uid}"


def target_name(clone: VirtualMachineClone) -> str:
    """spec.target.name, or KubeVirt's generated `vm-clone-<...>`."""
    target = clone.spec.target
    return target.name if target is not None and target.name else f"vm-clone-{clone.uid[:8]}"


def volume_policy(clone: VirtualMachineClone) -> VolumeRestorePolicy:
    if clone.spec.volume_name_policy is VolumeNamePolicy.PREFIX_TARGET_NAME:
        return VolumeRestorePolicy.PREFIX_TARGET_NAME
    return VolumeRestorePolicy.RANDOMIZE_NAMES


def kept(key: str, filters: Sequence[str]) -> bool:
    """KubeVirt's filters: none keeps all; otherwise the last matching filter decides."""
    if not filters:
        return True
    keep = False
    for f in filters:
        if f.startswith("!"):
            if fnmatch.fnmatchcase(key, f[1:]):
                keep = False
        elif fnmatch.fnmatchcase(key, f):
            keep = True
    return keep


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _op(op: str, path: str, value: Any = None) -> str:
    body: dict[str, Any] = {"op": op, "path": path}
    if op != "remove":
        body["value"] = value
    return json.dumps(body)


def _filtered(path: str, values: Mapping[str, Any], filters: Sequence[str]) -> list[str]:
    return [_op("remove", f"{path}/{_escape(k)}") for k in values if not kept(k, filters)]


def clone_patches(
    clone: VirtualMachineClone, vm_metadata: Mapping[str, Any], vm_spec: Mapping[str, Any]
) -> list[str]:
    """The patches for the restore into the clone's target."""
    spec = clone.spec
    domain = ((vm_spec.get("template") or {}).get("spec") or {}).get("domain") or {}
    interfaces = (domain.get("devices") or {}).get("interfaces") or []
    ops: list[str] = []
    for i, iface in enumerate(interfaces):
        path = f"{DOMAIN}/devices/interfaces/{i}/macAddress"
        new = spec.new_mac_addresses.get(str(iface.get("name")))
        if new:
            ops.append(_op("add", path, new))
        elif "macAddress" in iface:
            ops.append(_op("remove", path))
    firmware = domain.get("firmware")
    if isinstance(firmware, Mapping) and "uuid" in firmware:
        ops.append(_op("remove", f"{DOMAIN}/firmware/uuid"))
    if spec.new_sm_bios_serial:
        if isinstance(firmware, Mapping):
            ops.append(_op("add", f"{DOMAIN}/firmware/serial", spec.new_sm_bios_serial))
        else:
            ops.append(_op("add", f"{DOMAIN}/firmware", {"serial": spec.new_sm_bios_serial}))
    elif isinstance(firmware, Mapping) and "serial" in firmware:
        ops.append(_op("remove", f"{DOMAIN}/firmware/serial"))
    ops += _filtered("/metadata/labels", vm_metadata.get("labels") or {}, spec.label_filters)
    ops += _filtered(
        "/metadata/annotations", vm_metadata.get("annotations") or {}, spec.annotation_filters
    )
    template_meta = (vm_spec.get("template") or {}).get("metadata") or {}
    ops += _filtered(
        f"{TEMPLATE}/metadata/labels",
        template_meta.get("labels") or {},
        spec.template.label_filters,
    )
    ops += _filtered(
        f"{TEMPLATE}/metadata/annotations",
        template_meta.get("annotations") or {},
        spec.template.annotation_filters,
    )
    return [*ops, *spec.patches]
