"""What an export's source is now (reads only): the claims to serve, or why they cannot be.

    PersistentVolumeClaim  the claim, Bound, used by no running VMI
    VirtualMachine         the VM, stopped (no VMI), its template's claims (persistentVolumeClaim
                           and dataVolume volumes), each as above

The VMIs come from the informer cache; claims are read with a GET.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from controller.export.bodies import BLOCK, Claim
from controller.export.logic import (
    IN_USE,
    INVALID,
    NO_VOLUMES,
    PVC_NOT_FOUND,
    PVC_PENDING,
    VM_NOT_FOUND,
    Blocked,
)
from controller.informers import Informers
from shared.kube import PVCS, KubeClient, NotFound
from shared.model import VirtualMachineInstance
from shared.model.export import VM_KIND, VirtualMachineExport, export_errors
from shared.model.memorydump import PVC_MEMORY_DUMP_ANNOTATION

IO_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    claims: tuple[Claim, ...] = ()
    blocked: Blocked | None = None
    vm_name: str | None = None


def vmi_claims(vmi: VirtualMachineInstance) -> set[str]:
    """Every claim a VMI's volumes name (persistentVolumeClaim, dataVolume, memoryDump)."""
    return {
        v.hotplug_claim
        for v in vmi.spec.volumes
        if v.hotplug_claim and (v.claim is not None or v.memory_dump is not None)
    }


async def read_source(
    client: KubeClient, informers: Informers, vme: VirtualMachineExport
) -> Source:
    """The claims of the export's source, or why it cannot be exported now."""
    errors = export_errors(vme)
    source = vme.spec.source
    if errors or source is None:
        return Source(blocked=Blocked(reason=INVALID, message="; ".join(map(str, errors))))
    name = source.name or ""
    names: tuple[str, ...] = (name,)
    vm_name = None
    if source.kind == VM_KIND:
        vm_name = name
        vm = informers.vms.store.get(f"{vme.namespace}/{name}")
        if vm is None:
            why = Blocked(reason=VM_NOT_FOUND, message=f"VirtualMachine {name} does not exist")
            return Source(blocked=why, vm_name=vm_name)
        vmi = informers.vmis.store.get(f"{vme.namespace}/{name}")
        if vmi is not None and not vmi.is_final():
            why = Blocked(reason=IN_USE, message=f"VirtualMachine {name} is running")
            return Source(blocked=why, vm_name=vm_name)
        volumes = vm.spec.template.spec.volumes
        names = tuple(
            dict.fromkeys(v.claim.claim_name for v in volumes if v.claim and v.claim.claim_name)
        )
        if not names:
            why = Blocked(reason=NO_VOLUMES, message=f"VirtualMachine {name} has no claims")
            return Source(blocked=why, vm_name=vm_name)
    claims = []
    running = _running(informers.vmis.store.list(), vme.namespace)
    for claim in names:
        found = await _claim(client, vme.namespace, claim, running)
        if isinstance(found, Blocked):
            return Source(blocked=found, vm_name=vm_name)
        claims.append(found)
    return Source(claims=tuple(claims), vm_name=vm_name)


def _running(vmis: Iterable[VirtualMachineInstance], namespace: str) -> dict[str, str]:
    """claim → the running VMI using it, in the namespace."""
    return {
        claim: vmi.name
        for vmi in vmis
        if vmi.namespace == namespace and not vmi.is_final()
        for claim in vmi_claims(vmi)
    }


async def _claim(
    client: KubeClient, namespace: str, name: str, running: dict[str, str]
) -> Claim | Blocked:
    try:
        async with asyncio.timeout(IO_TIMEOUT):
            raw = await client.get(PVCS, name, namespace=namespace)
    except NotFound:
        return Blocked(reason=PVC_NOT_FOUND, message=f"PersistentVolumeClaim {name} not found")
    phase = (raw.get("status") or {}).get("phase")
    if phase != "Bound":
        return Blocked(reason=PVC_PENDING, message=f"PersistentVolumeClaim {name} is {phase}")
    if name in running:
        message = (
            f"PersistentVolumeClaim {name} is in use by VirtualMachineInstance {running[name]}"
        )
        return Blocked(reason=IN_USE, message=message)
    mode = (raw.get("spec") or {}).get("volumeMode")
    notes = (raw.get("metadata") or {}).get("annotations") or {}
    dump = PVC_MEMORY_DUMP_ANNOTATION in notes
    return Claim(name=name, block=mode == BLOCK, memory_dump=dump)
