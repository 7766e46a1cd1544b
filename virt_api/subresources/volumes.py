"""addvolume / removevolume: KubeVirt's AddVolumeOptions and RemoveVolumeOptions, and the
spec patches they make, as pure functions.

    opts = parse_add(body, ref)                    # AddVolumeOptions … or 400
    ops = add_ops(spec, opts, ref, path=…)         # JSON patch of a VMI / VM template spec

AddVolumeOptions = {name, disk, volumeSource: {persistentVolumeClaim: {claimName,
hotpluggable}} | {dataVolume: {name, hotpluggable}}, dryRun}; RemoveVolumeOptions = {name,
dryRun}. The volume is added hotpluggable with its disk (bus scsi unless the disk says
virtio); only hotpluggable volumes may be removed. The sources a volume may be hotplugged
from are one table (HOTPLUG_SOURCES): the field naming the object, and the object that must
exist (a DataVolume's claim is attached once the DataVolume has Succeeded: the VMI
controller waits for it). Every patch starts with a `test` of the lists it changes, so two
requests racing on one object cannot both apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from shared.kube import DATAVOLUMES, PVCS, Resource
from shared.model.volumes import DEFAULT_HOTPLUG_BUS, HOTPLUG_BUSES
from virt_api.subresources.errors import BadRequest, VmiRef

DRY_RUN_ALL = "All"
VMI_SPEC = "/spec"
VM_TEMPLATE_SPEC = "/spec/template/spec"


@dataclass(frozen=True, slots=True, kw_only=True)
class HotplugSource:
    """A volume source that can be hotplugged: the key naming its object, that object's
    kind (it must exist), and whether the source takes readOnly."""

    key: str
    resource: Resource
    takes_read_only: bool = False


# volumeSource key → how it is hotplugged (KubeVirt's HotplugVolumeSource members).
HOTPLUG_SOURCES: Mapping[str, HotplugSource] = {
    "persistentVolumeClaim": HotplugSource(key="claimName", resource=PVCS, takes_read_only=True),
    "dataVolume": HotplugSource(key="name", resource=DATAVOLUMES),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AddVolume:
    """A parsed AddVolumeOptions: `source` is a HOTPLUG_SOURCES key, `claim_name` the
    object it names (a DataVolume's claim has its name)."""

    name: str
    claim_name: str
    source: str = "persistentVolumeClaim"
    disk: Mapping[str, Any] = field(default_factory=dict)
    read_only: bool = False
    dry_run: bool = False

    @property
    def kind(self) -> HotplugSource:
        return HOTPLUG_SOURCES[self.source]

    def volume(self) -> dict[str, Any]:
        ref: dict[str, Any] = {self.kind.key: self.claim_name, "hotpluggable": True}
        if self.read_only:
            ref["readOnly"] = True
        return {"name": self.name, self.source: ref}


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveVolume:
    name: str
    dry_run: bool = False


def _load(body: bytes, ref: VmiRef, kind: str) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(body.decode()) if body.strip() else None
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise BadRequest(f"Can not unmarshal Request body to struct, error: {e}", vmi=ref) from e
    if not isinstance(raw, dict):
        raise BadRequest(f"the request body must be {kind} (a JSON object)", vmi=ref)
    return raw


def _dry_run(raw: Mapping[str, Any], ref: VmiRef) -> bool:
    dry_run = raw.get("dryRun") or []
    if not isinstance(dry_run, list) or any(v != DRY_RUN_ALL for v in dry_run):
        raise BadRequest(f"dryRun must be a list of {DRY_RUN_ALL!r}, got {dry_run!r}", vmi=ref)
    return bool(dry_run)


def _name(raw: Mapping[str, Any], ref: VmiRef, kind: str) -> str:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{kind} requires name to be set", vmi=ref)
    return name


def parse_add(body: bytes, ref: VmiRef) -> AddVolume:
    """AddVolumeOptions, or 400 naming what is wrong."""
    raw = _load(body, ref, "AddVolumeOptions")
    name = _name(raw, ref, "AddVolumeOptions")
    source = raw.get("volumeSource")
    if not isinstance(source, dict) or not source:
        raise BadRequest("AddVolumeOptions requires volumeSource to be set", vmi=ref)
    keys = [k for k in source if source[k] is not None]
    if len(keys) != 1 or keys[0] not in HOTPLUG_SOURCES:
        raise BadRequest(
            f"volume {name!r}: volumeSource must set exactly one of "
            f"{', '.join(HOTPLUG_SOURCES)} (got {', '.join(keys) or 'none'})",
            vmi=ref,
        )
    kind = HOTPLUG_SOURCES[keys[0]]
    body = source[keys[0]]
    claim_name = body.get(kind.key) if isinstance(body, dict) else None
    if not isinstance(claim_name, str) or not claim_name:
        raise BadRequest(f"volume {name!r}: volumeSource.{keys[0]}.{kind.key} must be set", vmi=ref)
    return AddVolume(
        name=name,
        claim_name=claim_name,
        source=keys[0],
        disk=_disk(raw.get("disk"), name, ref),
        read_only=kind.takes_read_only and bool(isinstance(body, dict) and body.get("readOnly")),
        dry_run=_dry_run(raw, ref),
    )


def _disk(raw: object, name: str, ref: VmiRef) -> dict[str, Any]:
    """The disk, named like the volume, on a bus that can be hotplugged (scsi by default)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BadRequest(f"volume {name!r}: disk must be an object", vmi=ref)
    disk = {**raw, "name": name}
    if "cdrom" in disk or "lun" in disk:
        raise BadRequest(
            f"volume {name!r}: only disk devices can be hotplugged (a cdrom's media are "
            "inserted by adding a hotpluggable volume for a cdrom the VM declares)",
            vmi=ref,
        )
    target = disk.get("disk") or {}
    if not isinstance(target, dict):
        raise BadRequest(f"volume {name!r}: disk.disk must be an object", vmi=ref)
    bus = target.get("bus") or DEFAULT_HOTPLUG_BUS
    if bus not in HOTPLUG_BUSES:
        raise BadRequest(
            f"volume {name!r}: bus {bus!r} cannot be hotplugged "
            f"(one of: {', '.join(HOTPLUG_BUSES)})",
            vmi=ref,
        )
    disk["disk"] = {**target, "bus": bus}
    return disk


def parse_remove(body: bytes, ref: VmiRef) -> RemoveVolume:
    """RemoveVolumeOptions, or 400."""
    raw = _load(body, ref, "RemoveVolumeOptions")
    return RemoveVolume(name=_name(raw, ref, "RemoveVolumeOptions"), dry_run=_dry_run(raw, ref))


def _lists(spec: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    volumes = spec.get("volumes") or []
    disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks") or []
    return list(volumes), list(disks)


def _tests(spec: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    """`test` ops pinning the lists a patch changes (absent lists: tested absent by add)."""
    volumes, disks = _lists(spec)
    ops = []
    if "volumes" in spec:
        ops.append({"op": "test", "path": f"{path}/volumes", "value": volumes})
    devices = (spec.get("domain") or {}).get("devices") or {}
    if "disks" in devices:
        ops.append({"op": "test", "path": f"{path}/domain/devices/disks", "value": disks})
    return ops


def add_ops(
    spec: Mapping[str, Any], opts: AddVolume, ref: VmiRef, *, path: str
) -> list[dict[str, Any]]:
    """The JSON patch adding the hotplugged volume and its disk to `spec` (at `path`)."""
    volumes, disks = _lists(spec)
    if any(v.get("name") == opts.name for v in volumes):
        raise BadRequest(
            f"Unable to add volume [{opts.name}] because volume with that name already exists",
            vmi=ref,
        )
    if any(d.get("name") == opts.name for d in disks):
        raise BadRequest(
            f"Unable to add volume [{opts.name}] because a disk with that name already exists",
            vmi=ref,
        )
    for v in volumes:
        if _claim_of(v) == opts.claim_name:
            raise BadRequest(
                f"Unable to add volume source [{opts.claim_name}] because it is already "
                f"used by volume [{v.get('name')}]",
                vmi=ref,
            )
    ops = _tests(spec, path)
    ops += _append(spec, path, "volumes", opts.volume(), present="volumes" in spec)
    devices = (spec.get("domain") or {}).get("devices")
    has_disks = isinstance(devices, dict) and "disks" in devices
    ops += _append(spec, f"{path}/domain/devices", "disks", dict(opts.disk), present=has_disks)
    return ops


def _append(
    spec: Mapping[str, Any], path: str, key: str, value: Any, *, present: bool
) -> list[dict[str, Any]]:
    if present:
        return [{"op": "add", "path": f"{path}/{key}/-", "value": value}]
    return [{"op": "add", "path": f"{path}/{key}", "value": [value]}]


def remove_ops(
    spec: Mapping[str, Any], opts: RemoveVolume, ref: VmiRef, *, path: str
) -> list[dict[str, Any]]:
    """The JSON patch removing a hotplugged volume and its disk from `spec`."""
    volumes, disks = _lists(spec)
    index = _index(volumes, opts.name)
    if index is None:
        raise BadRequest(
            f"Unable to remove volume [{opts.name}] because it does not exist", vmi=ref
        )
    if not _hotplug_ref(volumes[index]).get("hotpluggable"):
        raise BadRequest(
            f"Unable to remove volume [{opts.name}] because it is not hotpluggable", vmi=ref
        )
    ops = [*_tests(spec, path), {"op": "remove", "path": f"{path}/volumes/{index}"}]
    disk = _index(disks, opts.name)
    if disk is not None:
        ops.append({"op": "remove", "path": f"{path}/domain/devices/disks/{disk}"})
    return ops


def _index(items: Sequence[Mapping[str, Any]], name: str) -> int | None:
    return next((i for i, item in enumerate(items) if item.get("name") == name), None)


def _hotplug_ref(volume: Mapping[str, Any]) -> Mapping[str, Any]:
    """The volume's hotpluggable source ({} when it has none of HOTPLUG_SOURCES)."""
    for source in HOTPLUG_SOURCES:
        ref = volume.get(source)
        if isinstance(ref, Mapping):
            return ref
    return {}


def _claim_of(volume: Mapping[str, Any]) -> str | None:
    """The claim a volume mounts, whichever hotpluggable source names it."""
    for source, kind in HOTPLUG_SOURCES.items():
        ref = volume.get(source)
        if isinstance(ref, Mapping):
            return str(ref.get(kind.key) or "")
    return None
