"""A running VM's template volumes that only a restart brings to its VMI (pure).

Only hotpluggable volumes follow the template live (controller/vm/hotplug.py): the media
of a cdrom come and go that way, KubeVirt's declarative inject/eject. A volume that is not
hotpluggable — removed from the template (an "eject" of a disk or cdrom that was not
hot-plugged), added, or changed — sets RestartRequired naming it and why, as KubeVirt's
VM controller does; the VMI keeps it until the restart. With `updateVolumesStrategy:
Migration` a claim volume pointed at another claim is no restart: controller/vm/volmig.py
copies it live.

    restart_volumes(vm, vmi) → ["spec.volumes[name=cd]: …", …]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.model import VirtualMachine, VirtualMachineInstance, Volume
from shared.model.volmig import UpdateVolumesStrategy


def _where(name: str | None) -> str:
    return f"spec.volumes[name={name}]"


def _removed(volume: Volume, *, cdrom: bool) -> str:
    what = "cdrom media" if cdrom else "volume"
    return (
        f"{_where(volume.name)}: {what} {volume.name!r} removed, but it is not hotpluggable "
        "(only a hotpluggable volume is ejected or unplugged live)"
    )


def restart_volumes(vm: VirtualMachine, vmi: VirtualMachineInstance) -> list[str]:
    """The non-hotpluggable volume changes of the template against the running VMI."""
    template = {v.name: v for v in vm.spec.template.spec.volumes}
    running = {v.name: v for v in vmi.spec.volumes}
    cdroms = {d.name for d in vmi.spec.domain.devices.disks if d.is_cdrom}
    migrates = vm.spec.update_volumes_strategy is UpdateVolumesStrategy.MIGRATION
    out = [
        _removed(v, cdrom=name in cdroms)
        for name, v in running.items()
        if not v.is_hotplug and name not in template
    ]
    for name, v in template.items():
        if v.is_hotplug:
            continue
        have = running.get(name)
        if have is None:
            out.append(f"{_where(name)}: volume {name!r} added, but it is not hotpluggable")
        elif migrates and _claims_both(v, have):
            continue  # a claim moved: volume migration's (controller/vm/volmig.py)
        elif not _within(v.to_dict(), have.to_dict()):
            out.append(f"{_where(name)}: volume {name!r} changed, but it is not hotpluggable")
    return out


def _claims_both(template: Volume, running: Volume) -> bool:
    return template.claim is not None and running.claim is not None


def _within(template: Any, running: Any) -> bool:
    """Every value the template sets is the running one's (keys only the VMI has, its
    defaults, are no change)."""
    if isinstance(template, Mapping):
        return isinstance(running, Mapping) and all(
            _within(value, running.get(key)) for key, value in template.items()
        )
    return bool(template == running)
