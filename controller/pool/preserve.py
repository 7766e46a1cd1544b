"""A pool's scale-in statePreservation (KubeVirt 1.8's pool), pure: which DataVolumes a
VM removed by the pool leaves behind, and which ones a pool VM takes back.

    Disabled  (default) a removed VM's DataVolumes go with it (owned by the VM: the
              garbage collector deletes them, and their claims, after the VM);
    Offline   (Online the same) proactive scale-in (and autohealing, which removes
              VMs the same way) first lets go of the VM's DataVolumes (its
              ownerReference removed, at the DataVolume's resourceVersion), then deletes
              the VM: the DataVolumes and their claims (owned by the DataVolume) stay. A
              VM whose DataVolumes could not all be let go is not deleted (retried):
              nothing is ever lost;
    reuse     scale-out takes the lowest free index, so VM `<pool>-<index>` comes back
              with the same name and so the same DataVolume names (`<template>-<index>`):
              its VM controller finds them Succeeded and starts the VMI on them, and the
              pool gives each member back its DataVolumes left without a controller
              (ownerReference to the VM added): deleted with it again when Disabled.

    opportunistic Offline: a VM deleted by someone else. Its DataVolumes can only be let
              go while the VM is held: the pool puts KubeVirt's finalizer
              pool.kubevirt.io/finalizer on its VMs (made so, or patched), and for each
              VM being deleted that carries it lets go of its DataVolumes, then removes
              the finalizer (the garbage collector then deletes the VM and its VMI, not
              its DataVolumes). Without Offline (or once the pool is being deleted, or
              gone) the finalizer is only removed: nothing is held for good.

KubeVirt puts that finalizer on every pool VM and lets go after deleting; kubevirt-py
lets go before a proactive deletion, which needs no finalizer, and sets it only where
opportunistic Offline needs it. Online ("claims and memory" in KubeVirt's API text) is
handled as Offline, as KubeVirt 1.8's controller does (any value but Disabled keeps the
DataVolumes; no memory is kept there either). A preserved VM is no VM at all (deleted): never
counted as a replica, ready or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from controller.vm.datavolumes import template_names, volume_datavolumes
from shared.model import VirtualMachine
from shared.model.datavolume import DataVolume
from shared.model.pool import StatePreservation, VirtualMachinePool

VM = VirtualMachine
POOL_FINALIZER = "pool.kubevirt.io/finalizer"  # KubeVirt's, on the pool's VMs
Lookup = Callable[[str], DataVolume | None]  # a DataVolume of the pool's namespace by name


def preserving(pool: VirtualMachinePool) -> bool:
    """Whether the pool's proactive scale-in keeps the DataVolumes of the VMs it removes."""
    strategy = pool.spec.scale_in_strategy
    proactive = strategy.proactive if strategy is not None else None
    kept = proactive.state_preservation if proactive is not None else None
    return kept is not None and kept is not StatePreservation.DISABLED


def holding(pool: VirtualMachinePool) -> bool:
    """Whether the pool keeps the DataVolumes of VMs deleted by others (opportunistic
    Offline): its VMs carry the finalizer then."""
    strategy = pool.spec.scale_in_strategy
    chosen = strategy.opportunistic if strategy is not None else None
    kept = chosen.state_preservation if chosen is not None else None
    enabled = kept is not None and kept is not StatePreservation.DISABLED
    return enabled and not pool.metadata.is_deleting


def held(vm: VM) -> bool:
    """Whether the VM carries the pool's finalizer."""
    return POOL_FINALIZER in vm.metadata.finalizers


def to_hold(pool: VirtualMachinePool, vms: Iterable[VM]) -> list[VM]:
    """The live VMs to give the finalizer (none unless the pool is holding)."""
    if not holding(pool):
        return []
    return [vm for vm in vms if not vm.metadata.is_deleting and not held(vm)]


def to_finish(vms: Iterable[VM]) -> list[VM]:
    """The VMs being deleted that the pool still holds (its finalizer to remove)."""
    return [vm for vm in vms if vm.metadata.is_deleting and held(vm)]


def finalizers(vm: VM, *, hold: bool) -> dict[str, Any]:
    """The merge patch adding (hold) or removing the pool's finalizer, at the VM's
    resourceVersion."""
    kept = [f for f in vm.metadata.finalizers if f != POOL_FINALIZER]
    return {
        "metadata": {
            "resourceVersion": vm.metadata.resource_version,
            "finalizers": [*kept, POOL_FINALIZER] if hold else kept,
        }
    }


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
