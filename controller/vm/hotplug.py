"""Declarative hotplug: a running VM's VMI follows the hotpluggable volumes of the VM's
template (KubeVirt's VM-level hotplug; virtctl addvolume --persist lands here through the
template).

- a hotpluggable volume in the template and not in the VMI is added to the VMI, with the
  template's disk for it (a scsi disk when the template has none);
- a volume the VMI got this way (recorded in its FROM_TEMPLATE annotation) and gone from
  the template is removed from the VMI.
Volumes hot-plugged into the VMI alone (virtctl addvolume without --persist) are never
removed here: the template never had them. A cdrom disk both have (declared with no
volume: an empty tray) stays when its volume comes (media inserted) or goes (ejected):
KubeVirt's declarative inject/eject; the launcher changes the media (launcher/cdrom.py).
The patch tests both lists first, so it cannot race the subresource API or the user.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from shared.model import VirtualMachine, VirtualMachineInstance, VMIPhase
from shared.model.volumes import DEFAULT_HOTPLUG_BUS

FROM_TEMPLATE = "kubevirt-py.io/hotplug-from-template"


def _recorded(vmi: VirtualMachineInstance) -> list[str]:
    try:
        names = json.loads(vmi.metadata.annotations.get(FROM_TEMPLATE, "[]"))
    except ValueError:
        return []
    return [str(n) for n in names] if isinstance(names, list) else []


def started_with(vm: VirtualMachine) -> dict[str, str]:
    """The record a new VMI starts with: the template's hotpluggable volumes are the
    template's from the start, so dropping one from the template unplugs (or ejects) it."""
    names = [v.name for v in vm.spec.template.spec.volumes if v.name and v.is_hotplug]
    return {FROM_TEMPLATE: json.dumps(names)} if names else {}


def template_ops(vm: VirtualMachine, vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The JSON patch making a Running VMI follow the template ([]: nothing to do)."""
    if vmi.status.phase is not VMIPhase.RUNNING or vmi.metadata.is_deleting:
        return []
    template = vm.spec.template.spec
    wanted = [v.name for v in template.volumes if v.name and v.is_hotplug]
    present = {v.name for v in vmi.spec.volumes}
    recorded = _recorded(vmi)
    add = [n for n in wanted if n not in present]
    hotplugged = {v.name for v in vmi.spec.volumes if v.is_hotplug}
    remove = {n for n in recorded if n not in wanted and n in hotplugged}
    if not add and not remove:
        return []
    raw_template, raw_vmi = vm.spec.template.spec.to_dict(), vmi.to_dict().get("spec", {})
    volumes, disks = _lists(raw_vmi)
    t_volumes, t_disks = _lists(raw_template)
    new_volumes = [v for v in volumes if v.get("name") not in remove]
    new_volumes += [_named(t_volumes, n) or {"name": n} for n in add]
    # A disk both keep (a cdrom: its media come and go) stays; the others go with their volume.
    kept = {d.get("name") for d in t_disks}
    new_disks = [d for d in disks if d.get("name") not in remove or d.get("name") in kept]
    have = {d.get("name") for d in new_disks}
    new_disks += [_named(t_disks, n) or _default_disk(n) for n in add if n not in have]
    names = [n for n in recorded if n not in remove] + add
    return [
        {"op": "test", "path": "/spec/volumes", "value": volumes},
        {"op": "replace" if "volumes" in raw_vmi else "add", "path": "/spec/volumes",
         "value": new_volumes},
        *_disk_ops(raw_vmi, disks, new_disks),
        *_annotation_ops(vmi, names),
    ]  # fmt: skip


def _lists(spec: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    devices = (spec.get("domain") or {}).get("devices") or {}
    return list(spec.get("volumes") or []), list(devices.get("disks") or [])


def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((i for i in items if i.get("name") == name), None)


def _default_disk(name: str) -> dict[str, Any]:
    return {"name": name, "disk": {"bus": DEFAULT_HOTPLUG_BUS}}


def _disk_ops(
    raw_vmi: Mapping[str, Any], disks: list[dict[str, Any]], new: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    devices = (raw_vmi.get("domain") or {}).get("devices") or {}
    if "disks" in devices:
        return [
            {"op": "test", "path": "/spec/domain/devices/disks", "value": disks},
            {"op": "replace", "path": "/spec/domain/devices/disks", "value": new},
        ]
    return [{"op": "add", "path": "/spec/domain/devices/disks", "value": new}]


def _annotation_ops(vmi: VirtualMachineInstance, names: list[str]) -> list[dict[str, Any]]:
    value = json.dumps(names)
    if not vmi.metadata.annotations:
        return [{"op": "add", "path": "/metadata/annotations", "value": {FROM_TEMPLATE: value}}]
    key = FROM_TEMPLATE.replace("~", "~0").replace("/", "~1")
    return [{"op": "add", "path": f"/metadata/annotations/{key}", "value": value}]
