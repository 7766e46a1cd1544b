"""The writes of a pool's statePreservation (decided in controller/pool/preserve.py):
DataVolumes let go of and taken back (their ownerReferences), the pool's finalizer put on
and taken off its VMs. Each write is at the object's resourceVersion: one changed
meanwhile is left for the next sync, which sees it again.

    let_go(pool, doomed)   proactive Offline: each doomed VM's DataVolumes let go
                           (otherwise a held VM's finalizer removed); the VMs now safe
                           to delete, and the errors of the others (kept)
    adopt(pool, vms)       each live member's template DataVolumes without a controller
    hold(pool, vms)        opportunistic Offline: the finalizer on live VMs lacking it
    finish(pool, vms)      VMs being deleted that carry it: DataVolumes let go (when
                           holding), then the finalizer removed; the errors
    release_strays(key, pool)  VMs being deleted, held by a pool gone (or made again
                           under another UID): the finalizer removed, nothing kept
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import structlog

from controller.owned import WRITE_TIMEOUT
from controller.pool import preserve
from shared.kube import (
    DATAVOLUMES,
    VMS,
    ApiError,
    Conflict,
    KubeClient,
    NotFound,
    Resource,
    Store,
    TransportError,
)
from shared.model import VirtualMachine
from shared.model.datavolume import DataVolume
from shared.model.objects import KubeObject
from shared.model.pool import VirtualMachinePool

log = structlog.get_logger("controller.pool")

Pool = VirtualMachinePool
VM = VirtualMachine


class Keeper:
    """Keeps what a pool's statePreservation keeps."""

    def __init__(
        self, client: KubeClient, *, datavolumes: Store[DataVolume], vms: Store[VM]
    ) -> None:
        self._client = client
        self._datavolumes = datavolumes
        self._vms = vms
        self.strays: set[str] = set()  # pool keys with held VMs no pool of theirs holds

    def flag_stray(self, vm: VM) -> None:
        """Note a VM being deleted, held by a pool that does not resolve (gone)."""
        ref = vm.metadata.controller_ref()
        if preserve.held(vm) and vm.metadata.is_deleting and ref and ref.kind == Pool.KIND:
            self.strays.add(f"{vm.namespace}/{ref.name}")

    def _lookup(self, namespace: str) -> preserve.Lookup:
        return lambda name: self._datavolumes.get(f"{namespace}/{name}")

    async def let_go(self, pool: Pool, doomed: Sequence[VM]) -> tuple[tuple[VM, ...], list[str]]:
        """Before the pool deletes VMs (scale-in, autohealing): with proactive Offline
        each one's DataVolumes let go; without, a held VM's finalizer removed (what the
        pool deletes itself follows the proactive setting, as in KubeVirt). The VMs now
        to delete, and the errors of the others (kept, retried)."""
        keep = preserve.preserving(pool)
        ready: list[VM] = []
        errors: list[str] = []
        for vm in doomed:
            if keep:
                failures = await self._release(vm)
            elif preserve.held(vm):
                failure = await self._patch(VMS, vm, preserve.finalizers(vm, hold=False))
                failures = [failure] if failure is not None else []
            else:
                failures = []
            errors += failures
            if not failures:
                ready.append(vm)
        return tuple(ready), errors

    async def _release(self, vm: VM) -> list[str]:
        dvs = preserve.to_release(vm, self._lookup(vm.namespace))
        results = [await self._patch(DATAVOLUMES, dv, preserve.released(dv, vm)) for dv in dvs]
        failures = [r for r in results if r is not None]
        if not failures:
            log.info("vm_state_preserved", name=vm.name, datavolumes=[dv.name for dv in dvs])
        return failures

    async def adopt(self, pool: Pool, vms: Sequence[VM]) -> None:
        """Give each live member back its template DataVolumes left without a controller."""
        live = [vm for vm in vms if not vm.metadata.is_deleting]
        for vm, dv in preserve.to_adopt(live, self._lookup(pool.namespace)):
            if await self._patch(DATAVOLUMES, dv, preserve.adopted(dv, vm)) is None:
                log.info("datavolume_adopted", name=dv.name, vm=vm.name)

    async def hold(self, pool: Pool, vms: Sequence[VM]) -> None:
        """Put the pool's finalizer on its live VMs lacking it (opportunistic Offline)."""
        for vm in preserve.to_hold(pool, vms):
            if await self._patch(VMS, vm, preserve.finalizers(vm, hold=True)) is None:
                log.info("vm_held", name=vm.name)

    async def finish(self, pool: Pool, vms: Sequence[VM]) -> list[str]:
        """For each held VM being deleted: its DataVolumes let go when the pool holds
        them (opportunistic Offline), then the finalizer removed. The errors."""
        errors: list[str] = []
        for vm in preserve.to_finish(vms):
            failures = await self._release(vm) if preserve.holding(pool) else []
            if not failures:
                failure = await self._patch(VMS, vm, preserve.finalizers(vm, hold=False))
                failures = [failure] if failure is not None else []
            errors += failures
        return errors

    async def release_strays(self, key: str, pool: Pool | None) -> None:
        """The held VMs being deleted whose pool `key` is gone (or is another object
        now): the finalizer removed, nothing kept (KubeVirt's rule on pool deletion)."""
        if key not in self.strays:
            return
        self.strays.discard(key)
        namespace, _, name = key.partition("/")
        for vm in preserve.to_finish(self._vms.list()):
            ref = vm.metadata.controller_ref()
            if ref is None or ref.kind != Pool.KIND or vm.namespace != namespace:
                continue
            stray = ref.name == name and (pool is None or ref.uid != pool.uid)
            if stray and await self._patch(VMS, vm, preserve.finalizers(vm, hold=False)):
                self.strays.add(key)  # retried on the VM's next event or sync

    async def _patch(
        self, resource: Resource, obj: KubeObject, patch: dict[str, Any]
    ) -> str | None:
        """One merge patch: an error message, or None (done, or the object changed or
        went meanwhile: its event brings the pool back)."""
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.patch(resource, obj.name, patch, namespace=obj.namespace)
        except NotFound:
            return None
        except Conflict:
            return f"{obj.KIND} {obj.name} changed meanwhile"
        except (ApiError, TransportError, TimeoutError) as e:
            return f"patching {obj.KIND} {obj.name}: {e}"
        return None
