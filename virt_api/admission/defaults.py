"""KubeVirt's defaults, applied at admission (virt-api's mutating webhook): pure functions
from a wire dict to the defaulted dict, and from there to a JSONPatch.

For a VMI spec (and a VM's template spec):
- every volume without a disk gets one (`disk: {bus: virtio}`), a disk without a target
  gets `disk: {}`, a target without a bus gets virtio (cdrom: sata);
- no interfaces and no networks (and autoattachPodInterface not false): the pod network
  with a masquerade interface, named `default`;
- machine.type: q35, as KubeVirt (unless configured; `pc` is honoured when asked for);
- memory.guest from resources.requests.memory, and requests.memory from memory.guest;
- CPU topology counts default to 1; terminationGracePeriodSeconds to 30;
- efi.secureBoot to true and a feature's `enabled` (features.smm) to true, as KubeVirt's
  API defaults; a secure-boot guest's machine type to q35 (libvirt's rule for a secure
  flash).
A VM's template leaves to its instancetype the CPU and memory defaults, and to its
preference the disk buses, machine type and grace period: the VMI the VM controller
creates is expanded with them, then defaulted at its own admission.
Malformed input is left as it is: validation then names what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.model._codec import copy_json

DEFAULT_NETWORK = "default"
DEFAULT_DISK_BUS = "virtio"
DEFAULT_CDROM_BUS = "sata"
# A lun is SCSI passthrough: scsi (KubeVirt's amd64 default, sata, has no lun in libvirt).
DEFAULT_BUSES = (("disk", DEFAULT_DISK_BUS), ("cdrom", DEFAULT_CDROM_BUS), ("lun", "scsi"))
DEFAULT_GRACE_PERIOD_SECONDS = 30
SECURE_BOOT_MACHINE_TYPE = "q35"


@dataclass(frozen=True, slots=True, kw_only=True)
class Defaults:
    """The values admission fills in."""

    # The machine type when none is set: q35, as KubeVirt (PCIe, hot-pluggable root ports).
    machine_type: str = "q35"


def _obj(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    """parent[key] as a dict, created when absent; None when present but not a dict."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else None


def _list(parent: dict[str, Any], key: str) -> list[Any] | None:
    value = parent.get(key)
    if value is None:
        value = parent[key] = []
    return value if isinstance(value, list) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Leave:
    """What a VM's template leaves to its instancetype / preference."""

    sizing: bool = False  # cpu and memory (instancetype)
    preferences: bool = False  # disk buses, machine type (preference)


def _default_disks(spec: dict[str, Any], devices: dict[str, Any], *, buses: bool) -> None:
    disks = _list(devices, "disks")
    volumes = spec.get("volumes")
    if disks is None:
        return
    named = {d.get("name") for d in disks if isinstance(d, dict)}
    named |= _acpi_volumes(spec)  # tables, not disks
    shares = devices.get("filesystems")  # a virtiofs share's volume is no disk
    named |= {f.get("name") for f in shares or () if isinstance(f, dict)}
    for vol in volumes if isinstance(volumes, list) else ():
        name = vol.get("name") if isinstance(vol, dict) else None
        if isinstance(name, str) and name and name not in named:
            disks.append({"name": name, "disk": {"bus": DEFAULT_DISK_BUS} if buses else {}})
            named.add(name)
    for disk in disks:
        if not isinstance(disk, dict):
            continue
        if not any(disk.get(k) is not None for k in ("disk", "cdrom", "lun")):
            disk["disk"] = {}
        if not buses:
            continue
        for kind, bus in DEFAULT_BUSES:
            target = disk.get(kind)
            if isinstance(target, dict) and target.get("bus") is None:
                target["bus"] = bus
    if not disks:
        del devices["disks"]


def _acpi_volumes(spec: dict[str, Any]) -> set[Any]:
    """The volumes domain.firmware.acpi names (no disk is added for them)."""
    acpi: Any = spec
    for key in ("domain", "firmware", "acpi"):  # read only: nothing is created here
        acpi = acpi.get(key) if isinstance(acpi, dict) else None
    if not isinstance(acpi, dict):
        return set()
    return {acpi.get(k) for k in ("slicNameRef", "msdmNameRef")} - {None}


def _default_network(spec: dict[str, Any], devices: dict[str, Any]) -> None:
    if devices.get("autoattachPodInterface") is False:
        return
    if devices.get("interfaces") or spec.get("networks"):
        return
    devices["interfaces"] = [{"name": DEFAULT_NETWORK, "masquerade": {}}]
    spec["networks"] = [{"name": DEFAULT_NETWORK, "pod": {}}]


def _default_memory(domain: dict[str, Any]) -> None:
    memory = _obj(domain, "memory")
    resources = _obj(domain, "resources")
    requests = _obj(resources, "requests") if resources is not None else None
    if memory is None or requests is None:
        return
    if memory.get("guest") is None and requests.get("memory") is not None:
        memory["guest"] = requests["memory"]
    if requests.get("memory") is None and memory.get("guest") is not None:
        requests["memory"] = memory["guest"]
    if not memory:
        del domain["memory"]
    if not requests and resources is not None:
        del resources["requests"]
    if resources is not None and not resources:
        del domain["resources"]


def _default_cpu(domain: dict[str, Any]) -> None:
    cpu = _obj(domain, "cpu")
    if cpu is None:
        return
    for key in ("sockets", "cores", "threads"):
        if cpu.get(key) is None:
            cpu[key] = 1


def _default_firmware(domain: dict[str, Any]) -> bool:
    """secureBoot and smm.enabled default to true; True when secure boot is on."""
    features = domain.get("features")
    smm = features.get("smm") if isinstance(features, dict) else None
    if isinstance(smm, dict) and smm.get("enabled") is None:
        smm["enabled"] = True
    firmware = domain.get("firmware")
    bootloader = firmware.get("bootloader") if isinstance(firmware, dict) else None
    efi = bootloader.get("efi") if isinstance(bootloader, dict) else None
    if not isinstance(efi, dict):
        return False
    if efi.get("secureBoot") is None:
        efi["secureBoot"] = True
    return efi["secureBoot"] is True


def default_vmi_spec(
    spec: Mapping[str, Any], defaults: Defaults, *, leave: _Leave = _Leave()
) -> dict[str, Any]:
    """A copy of a VMI spec with KubeVirt's defaults filled in (but what `leave` says)."""
    out: dict[str, Any] = copy_json(spec)
    domain = _obj(out, "domain")
    if domain is None:
        return out
    devices = _obj(domain, "devices")
    if devices is not None:
        _default_disks(out, devices, buses=not leave.preferences)
        _default_network(out, devices)
        if not devices:
            del domain["devices"]
    secure_boot = _default_firmware(domain)
    if not leave.preferences:
        machine = _obj(domain, "machine")
        if machine is not None and not machine.get("type"):  # "" is the default too
            machine["type"] = SECURE_BOOT_MACHINE_TYPE if secure_boot else defaults.machine_type
    if not leave.sizing:
        _default_memory(domain)
        _default_cpu(domain)
    if out.get("terminationGracePeriodSeconds") is None and not leave.preferences:
        out["terminationGracePeriodSeconds"] = DEFAULT_GRACE_PERIOD_SECONDS
    return out


def default_vm_spec(spec: Mapping[str, Any], defaults: Defaults) -> dict[str, Any]:
    """A copy of a VM spec whose template spec has the VMI defaults."""
    out: dict[str, Any] = copy_json(spec)
    template = _obj(out, "template")
    if template is None:
        return out
    template_spec = template.get("spec")
    if template_spec is None:
        template_spec = {}
    if isinstance(template_spec, dict):
        leave = _Leave(
            sizing=out.get("instancetype") is not None,
            preferences=out.get("preference") is not None,
        )
        template["spec"] = default_vmi_spec(template_spec, defaults, leave=leave)
    return out


def spec_patch(obj: Mapping[str, Any], new_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch taking `obj` to `new_spec` (KubeVirt's: one op on /spec), [] if same."""
    old = obj.get("spec")
    if old == new_spec:
        return []
    op = "replace" if "spec" in obj else "add"
    return [{"op": op, "path": "/spec", "value": new_spec}]


def mutate(kind: str, obj: Mapping[str, Any], defaults: Defaults) -> list[dict[str, Any]]:
    """The JSONPatch of defaults for a VMI or VM (other kinds: none)."""
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        return []
    if kind == "VirtualMachineInstance":
        return spec_patch(obj, default_vmi_spec(spec, defaults))
    if kind == "VirtualMachine":
        return spec_patch(obj, default_vm_spec(spec, defaults))
    return []
