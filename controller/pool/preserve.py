"""A pool's scale-in statePreservation (KubeVirt 1.8's pool), pure: which DataVolumes a
VM removed by the pool leaves behind, and which ones a pool VM takes back.

    Disabled  (default) a removed VM's DataVolumes go with it (owned by the VM: the
              garbage collector deletes them, and their claims, after the VM);
    Offline   proactive scale-in (and autohealing, which removes VMs the same way)
              first lets go of the VM's DataVolumes (its ownerReference removed, at the
              DataVolume's resourceVersion), then deletes the VM: the DataVolumes and
              their claims (owned by the DataVolume) stay. A VM whose DataVolumes could
              not all be let go is not deleted (retried): nothing is ever lost;
    reuse     scale-out takes the lowest free index, so VM `<pool>-<index>` comes back
              with the same name and so the same DataVolume names (`<template>-<index>`):
              its VM controller finds them Succeeded and starts the VMI on them, and the
              pool gives each member back its DataVolumes left without a controller
              (ownerReference to the VM added): deleted with it again when Disabled.

KubeVirt holds each pool VM with a finalizer to let go of its DataVolumes after deleting
it; kubevirt-py lets go before deleting, which needs none for proactive scale-in. A VM
deleted by someone else (opportunistic scale-in) would need that finalizer, so its
statePreservation stays refused (shared/model/_validate_pool.py), as does Online (memory).
A preserved VM is no VM at all (deleted): never counted as a replica, ready or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from controller.vm.datavolumes import template_names, volume_datavolumes
from shared.model import VirtualMachine
from shared.model.datavolume import DataVolume
from shared.model.pool import StatePreservation, VirtualMachinePool

VM = VirtualMachine
Lookup = Callable[[str], DataVolume | None]  # a DataVolume of the pool's namespace by name


def preserving(pool: VirtualMachinePool) -> bool:
    """Whether the pool's proactive scale-in keeps the DataVolumes of the VMs it removes."""
    strategy = pool.spec.scale_in_strategy
    proactive = strategy.proactive if strategy is not None else None
    kept = proactive.state_preservation if proactive is not None else None
    return kept is StatePreservation.OFFLINE


def _controlled_by(dv: DataVolume, vm: VM) -> bool:
    ref = dv.metadata.controller_ref()
    return ref is not None and ref.uid == vm.uid


def to_release(vm: VM, lookup: Lookup) -> list[DataVolume]:
    """The VM's DataVolumes (its templates' and those its volumes name) it controls."""
    names = dict.fromkeys([*template_names(vm), *volume_datavolumes(vm)])
    found = (lookup(name) for name in names)
    return [dv for dv in found if dv is not None and _controlled_by(dv, vm)]


def to_adopt(vms: Iterable[VM], lookup: Lookup) -> list[tuple[VM, DataVolume]]:
    """(VM, DataVolume) for each live VM's template DataVolume left without a controller
    (let go at a preserving scale-in), not being deleted."""
    out = []
    for vm in vms:
        for name in template_names(vm):
            dv = lookup(name)
            free = dv is not None and dv.metadata.controller_ref() is None
            if dv is not None and free and not dv.metadata.is_deleting:
                out.append((vm, dv))
    return out


def released(dv: DataVolume, vm: VM) -> dict[str, Any]:
    """The merge patch letting go of `dv`: its ownerReferences without the VM's, at its
    resourceVersion (a DataVolume changed meanwhile answers Conflict)."""
    return _owners_patch(dv, [r for r in dv.metadata.owner_references if r.uid != vm.uid])


def adopted(dv: DataVolume, vm: VM) -> dict[str, Any]:
    """The merge patch giving `dv` back to VM `vm`: its controller reference added."""
    return _owners_patch(dv, [*dv.metadata.owner_references, vm.controller_reference()])


def _owners_patch(dv: DataVolume, refs: Sequence[Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "resourceVersion": dv.metadata.resource_version,
            "ownerReferences": [r.to_dict() for r in refs],
        }
    }
