"""memorydump / removememorydump: KubeVirt's memory dump requests on a VM.

    PUT …/virtualmachines/<name>/memorydump {claimName}   → 202: status.memoryDumpRequest
        {claimName, phase: Associating}; the VM controller takes it from there
        (controller/vm/memorydump.py)
    PUT …/virtualmachines/<name>/removememorydump         → 202: {claimName, phase:
        Dissociating, remove: true}

Refused as KubeVirt's virt-api refuses, naming the reason: no claim name and no earlier
request (400); another claim still associated, a dump underway, the VMI not running, the
claim missing (404), a Block claim, a read-only claim, a claim smaller than (the guest's
memory + 100 MiB) x 1.055 (filesystem overhead) aligned to 1 MiB, a claim another volume of
the VMI uses (409). The status patch tests the request it replaces, so two requests cannot both win.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import yaml

from shared.kube import PVCS, VMIS, VMS, KubeError, PatchType
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import GetsCreatesPatches
from shared.model import ParseError, VirtualMachine, VirtualMachineInstance, VMIPhase
from shared.model.errors import QuantityError
from shared.model.memorydump import MemoryDumpPhase, MemoryDumpRequest, needed_bytes
from shared.model.quantity import format_bytes, parse_bytes
from virt_api.subresources.errors import BadRequest, NotFound, SubresourceError, VmiRef
from virt_api.subresources.vmactions import conflict, vm_not_found

CALL_TIMEOUT = 10.0
BLOCK = "Block"
READ_ONLY = "ReadOnlyMany"


def parse_claim(body: bytes, ref: VmiRef) -> str:
    """The claimName of a VirtualMachineMemoryDumpRequest body ("" when not given)."""
    try:
        raw = yaml.safe_load(body.decode()) if body.strip() else None
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise BadRequest(f"Can not unmarshal Request body to struct, error: {e}", vmi=ref) from e
    if raw is None:
        raise BadRequest("Request with no body", vmi=ref)
    if not isinstance(raw, dict):
        raise BadRequest("the request body must be a VirtualMachineMemoryDumpRequest", vmi=ref)
    claim = raw.get("claimName") or ""
    if not isinstance(claim, str):
        raise BadRequest("claimName must be a string", vmi=ref)
    return claim


def wanted_claim(vm: VirtualMachine, claim: str, ref: VmiRef) -> str:
    """The claim this dump goes to: the one asked for, else the associated one."""
    current = vm.status.memory_dump_request
    if not claim and current is None:
        raise BadRequest("Memory dump requires claim name to be set", vmi=ref)
    if current is not None and current.phase is MemoryDumpPhase.DISSOCIATING:
        raise conflict(
            ref,
            f"can't dump memory for pvc [{claim or current.claim_name}] a "
            "remove memory dump request is in progress",
        )
    if current is not None and not current.finished:
        raise conflict(
            ref, f"memory dump request for pvc [{current.claim_name}] already in progress"
        )
    if current is not None and claim and claim != current.claim_name:
        raise conflict(
            ref,
            f"can't request memory dump for pvc [{claim}] while pvc "
            f"[{current.claim_name}] is still associated as the memory dump pvc",
        )
    if claim or current is None:
        return claim
    return current.claim_name or ""


def check_vmi(vmi: VirtualMachineInstance | None, claim: str, ref: VmiRef) -> None:
    """The VMI runs and no other volume of it uses the claim."""
    if vmi is None or vmi.status.phase is not VMIPhase.RUNNING or vmi.metadata.is_deleting:
        raise conflict(ref, "VMI is not running")
    for volume in vmi.spec.volumes:
        if volume.memory_dump is None and claim in (
            volume.hotplug_claim,
            volume.ephemeral.persistent_volume_claim.claim_name
            if volume.ephemeral and volume.ephemeral.persistent_volume_claim
            else None,
        ):
            raise conflict(ref, f"pvc [{claim}] is in use by volume [{volume.name}] of the VMI")


def check_claim(pvc: Mapping[str, Any], vmi: VirtualMachineInstance, ref: VmiRef) -> None:
    """A filesystem claim, writable, large enough for the guest's memory (KubeVirt's)."""
    name = str((pvc.get("metadata") or {}).get("name", ""))
    spec = pvc.get("spec") or {}
    if spec.get("volumeMode") == BLOCK:
        raise conflict(ref, f"pvc [{name}]: pvc should be filesystem pvc")
    modes = spec.get("accessModes") or []
    if modes and all(m == READ_ONLY for m in modes):
        raise conflict(ref, f"pvc [{name}]: pvc access mode can't be read only")
    raw = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    try:
        size = parse_bytes(raw) if raw is not None else 0
        memory = vmi.spec.domain.guest_memory_bytes() or 0
    except QuantityError as e:
        raise BadRequest(f"pvc [{name}]: {e}", vmi=ref) from e
    needed = needed_bytes(memory)
    if size < needed:
        raise conflict(
            ref,
            f"pvc [{name}]: pvc size [{format_bytes(size)}] should be bigger "
            f"then [{format_bytes(needed)}] (memory + overhead)",
        )


def status_ops(vm: VirtualMachine, request: MemoryDumpRequest) -> list[dict[str, Any]]:
    """The JSON patch putting `request` in the VM's status, testing the one it replaces."""
    value = request.to_dict()
    current = vm.status.memory_dump_request
    if current is not None:
        path = "/status/memoryDumpRequest"
        return [
            {"op": "test", "path": path, "value": current.to_dict()},
            {"op": "replace", "path": path, "value": value},
        ]
    if not vm.status.to_dict():
        return [{"op": "add", "path": "/status", "value": {"memoryDumpRequest": value}}]
    return [{"op": "add", "path": "/status/memoryDumpRequest", "value": value}]


class MemoryDumpApi:
    """The two requests' I/O (the API's own credentials, after the caller's review)."""

    def __init__(self, client: GetsCreatesPatches) -> None:
        self._client = client

    async def dump(self, ref: VmiRef, body: bytes) -> None:
        asked = parse_claim(body, ref)
        vm = VirtualMachine.from_dict(await self._get(VMS, ref.name, ref, vm=True))
        claim = wanted_claim(vm, asked, ref)
        vmi = await self._vmi(ref)
        check_vmi(vmi, claim, ref)
        assert vmi is not None
        try:
            pvc = await self._get(PVCS, claim, ref)
        except NotFound:
            raise NotFound(f'persistentvolumeclaim "{claim}" not found', vmi=ref) from None
        check_claim(pvc, vmi, ref)
        request = MemoryDumpRequest(claim_name=claim, phase=MemoryDumpPhase.ASSOCIATING)
        await self._patch(vm, status_ops(vm, request), ref)

    async def remove(self, ref: VmiRef) -> None:
        vm = VirtualMachine.from_dict(await self._get(VMS, ref.name, ref, vm=True))
        current = vm.status.memory_dump_request
        if current is None:
            raise conflict(
                ref, f"can't remove memory dump association for vm {vm.name}, no association found"
            )
        if current.remove:
            raise conflict(
                ref, f"memory dump remove request for pvc [{current.claim_name}] already exists"
            )
        request = MemoryDumpRequest(
            claim_name=current.claim_name, phase=MemoryDumpPhase.DISSOCIATING, remove=True
        )
        await self._patch(vm, status_ops(vm, request), ref)

    async def _get(self, resource: Any, name: str, ref: VmiRef, *, vm: bool = False) -> Any:
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                return await self._client.get(resource, name, namespace=ref.namespace)
        except KubeNotFound:
            raise (vm_not_found(ref) if vm else NotFound(f"{name} not found", vmi=ref)) from None
        except KubeError as e:
            raise SubresourceError(f"cannot read {name}: {e}", vmi=ref) from e

    async def _vmi(self, ref: VmiRef) -> VirtualMachineInstance | None:
        try:
            return VirtualMachineInstance.from_dict(await self._get(VMIS, ref.name, ref))
        except NotFound:
            return None
        except ParseError as e:
            raise SubresourceError(f"cannot read the VMI: {e}", vmi=ref) from e

    async def _patch(self, vm: VirtualMachine, ops: list[dict[str, Any]], ref: VmiRef) -> None:
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                await self._client.patch(
                    VMS,
                    vm.name,
                    ops,
                    namespace=ref.namespace,
                    patch_type=PatchType.JSON,
                    subresource="status",
                )
        except KubeError as e:
            raise conflict(ref, f"unable to patch vm status: {e}") from e
