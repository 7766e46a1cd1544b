"""The pool controller: keeps `spec.replicas` VirtualMachines of each VirtualMachinePool,
rolls template changes to them, and keeps the pool's status.

    reconcile(key): pool and its VMs from the caches → expectations satisfied? →
                    plan_pool() → VM creations, deletions, updates (and VMI restarts for a
                    proactive update) → one status write (ReplicaFailure on an error)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Sequence
from typing import Any

import structlog

from controller.owned import WRITE_TIMEOUT, FleetReconciler
from controller.pool import preserve
from controller.pool.logic import (
    Pool,
    PoolPlan,
    World,
    check_pool,
    owned,
    plan_pool,
    pool_status,
    updated_vm,
    vm_body,
)
from controller.pool.policies import next_heal_check
from controller.replicaset.logic import ScaleError
from shared.kube import (
    DATAVOLUMES,
    OWNER_INDEX,
    VMIS,
    VMPOOLS,
    VMS,
    AlreadyExists,
    ApiError,
    Conflict,
    DeleteOptions,
    EventType,
    Handlers,
    NotFound,
    Store,
    TransportError,
)
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.datavolume import DataVolume

log = structlog.get_logger("controller.pool")

VM = VirtualMachine
VMI = VirtualMachineInstance
Write = Coroutine[Any, Any, str | None]


class PoolController(FleetReconciler[Pool]):
    """Reconciles VirtualMachinePools against their VMs."""

    kind = "vmpool"
    synchronized_on = "pools"
    model = Pool
    resource = VMPOOLS
    owned = VMS
    invalid_event = "pool_invalid"

    def _owners(self) -> Store[Pool]:
        return self._informers.pools.store

    def _check(self, owner: Pool) -> None:
        check_pool(owner)

    def handlers(self) -> tuple[Handlers[Pool], Handlers[VM]]:
        """Callbacks for the pool and VM informers."""
        vms: Handlers[VM] = Handlers(
            on_add=self._vm_added,
            on_update=lambda old, new: self._vm_updated(new),
            on_delete=self._owned_deleted,
        )
        return self.owner_handlers(), vms

    def _vm_added(self, vm: VM) -> None:
        key = self._owner(vm)
        if key is not None:
            self.expectations.creation_observed(key)
        self.enqueue(key)

    def _vm_updated(self, vm: VM) -> None:
        if vm.metadata.is_deleting:
            self._owned_deleted(vm)
        else:
            self.enqueue(self._owner(vm))

    def vmi_handlers(self) -> Handlers[VMI]:
        """Callbacks for the VMI informer: a pool VM's VMI deleted (or being deleted)
        settles the restart expected of it and queues the pool."""
        return Handlers(
            on_update=lambda old, new: self._vmi_gone(new) if new.metadata.is_deleting else None,
            on_delete=self._vmi_gone,
        )

    def _vmi_gone(self, vmi: VMI) -> None:
        ref = vmi.metadata.controller_ref()
        if ref is None or ref.kind != VM.KIND:
            return
        vm = self._informers.vms.store.get(f"{vmi.namespace}/{ref.name}")
        key = self._owner(vm) if vm is not None and vm.uid == ref.uid else None
        if key is not None:
            self.expectations.deletion_observed(key, vmi.uid)
            self.enqueue(key)

    async def sync(self, key: str) -> None:
        pool = self._current(key)
        if pool is None:
            return
        vms = owned(pool, self._informers.vms.store.by_index(OWNER_INDEX, pool.uid))
        error: ScaleError | None = None
        if self.expectations.satisfied(key):
            vmis = self._informers.vmis.store
            world = World(
                vmis={vm.name: v for vm in vms if (v := vmis.get(vm.key)) is not None},
                now=self._clock(),
            )
            plan = plan_pool(pool, vms, world=world)
            error = await self._apply(pool, plan)
            if not (pool.spec.paused or pool.metadata.is_deleting):
                await self._adopt(pool, [vm for vm in vms if vm not in plan.delete])
            wait = next_heal_check(vms, pool.spec.autohealing, now=world.now)
            if wait is not None:  # a failing VM reaches minFailingToStartDuration then
                self.queue.add_after(key, wait + 1)
        await self._write_status(pool, vms, error)
        if error is not None:
            self.queue.add_rate_limited(key)

    async def _apply(self, pool: Pool, plan: PoolPlan) -> ScaleError | None:
        kept, failed = await self._let_go(pool, plan.delete)
        plan = dataclasses.replace(plan, delete=kept)
        # A proactive update's VMIs are expected gone too (one record: VMs and VMIs).
        restarts = {vm.name: v for vm in plan.update if plan.restart and (v := self._vmi(vm))}
        gone = [vm.uid for vm in plan.delete] + [v.uid for v in restarts.values()]
        if gone:
            self.expectations.expect_deletions(pool.key, gone)
        if plan.create:
            self.expectations.expect_creations(pool.key, len(plan.create))
        writes: list[Write] = [self._delete_owned(pool, vm) for vm in plan.delete]
        writes += [self._create(pool, i) for i in plan.create]
        writes += [self._update(pool, vm, restart=restarts.get(vm.name)) for vm in plan.update]
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(w) for w in writes]
        errors = [*failed, *(e for t in tasks if (e := t.result()) is not None)]
        if not errors:
            return None
        reason = "FailedCreate" if plan.create else "FailedDelete"
        return ScaleError(reason=reason, message=errors[0])

    def _datavolume(self, namespace: str) -> preserve.Lookup:
        store = self._informers.datavolumes.store
        return lambda name: store.get(f"{namespace}/{name}")

    async def _let_go(self, pool: Pool, doomed: Sequence[VM]) -> tuple[tuple[VM, ...], list[str]]:
        """With statePreservation Offline, let go of each doomed VM's DataVolumes first:
        the VMs whose DataVolumes are all let go (to delete), and the errors of the rest
        (kept, retried)."""
        if not doomed or not preserve.preserving(pool):
            return tuple(doomed), []
        lookup = self._datavolume(pool.namespace)
        ready: list[VM] = []
        errors: list[str] = []
        for vm in doomed:
            results = [await self._patch_owners(dv, preserve.released(dv, vm))
                       for dv in preserve.to_release(vm, lookup)]  # fmt: skip
            failures = [r for r in results if r is not None]
            errors += failures
            if not failures:
                ready.append(vm)
                log.info("vm_state_preserved", name=vm.name, datavolumes=len(results))
        return tuple(ready), errors

    async def _adopt(self, pool: Pool, vms: Sequence[VM]) -> None:
        """Give each live member back its template DataVolumes left without a controller."""
        live = [vm for vm in vms if not vm.metadata.is_deleting]
        for vm, dv in preserve.to_adopt(live, self._datavolume(pool.namespace)):
            if await self._patch_owners(dv, preserve.adopted(dv, vm)) is None:
                log.info("datavolume_adopted", name=dv.name, vm=vm.name)

    async def _patch_owners(self, dv: DataVolume, patch: dict[str, Any]) -> str | None:
        """Patch a DataVolume's ownerReferences; an error message, or None (done, or
        changed meanwhile: the next sync sees it again)."""
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.patch(DATAVOLUMES, dv.name, patch, namespace=dv.namespace)
        except (NotFound, Conflict):
            return f"DataVolume {dv.name} changed meanwhile"
        except (ApiError, TransportError, TimeoutError) as e:
            return f"patching DataVolume {dv.name}: {e}"
        return None

    async def _create(self, pool: Pool, index: int) -> str | None:
        body = vm_body(pool, index)
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.create(VMS, body, namespace=pool.namespace)
        except AlreadyExists:
            return None  # the cache lags: its add event settles the expectation
        except (ApiError, TransportError, TimeoutError) as e:
            self.expectations.creation_observed(pool.key)
            self._recorder.event(pool, EventType.WARNING, "FailedCreate",
                                 f"Error creating VM {body['metadata']['name']}: {e}")  # fmt: skip
            return str(e)
        name = body["metadata"]["name"]
        log.info("vm_created", name=name)
        self._recorder.event(pool, EventType.NORMAL, "SuccessfulCreate", f"Created VM {name}")
        return None

    def _vmi(self, vm: VM) -> VMI | None:
        vmi = self._informers.vmis.store.get(vm.key)
        return vmi if vmi is not None and not vmi.metadata.is_deleting else None

    async def _update(self, pool: Pool, vm: VM, *, restart: VMI | None) -> str | None:
        """Rewrite the VM to the template; a proactive update restarts its VMI too (its
        deletion expected: the next sync sees it gone, counted unavailable)."""
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.update(VMS, updated_vm(pool, vm))
                if restart is not None:
                    await self._client.delete(VMIS, restart.name, namespace=vm.namespace,
                                              options=DeleteOptions(uid=restart.uid))  # fmt: skip
        except (NotFound, Conflict):
            if restart is not None:
                self.expectations.deletion_observed(pool.key, restart.uid)
            return None  # changed or gone meanwhile: its event brings the pool back
        except (ApiError, TransportError, TimeoutError) as e:
            if restart is not None:
                self.expectations.deletion_observed(pool.key, restart.uid)
            return f"updating VM {vm.name}: {e}"
        log.info("vm_updated", name=vm.name, restarted=restart is not None)
        self._recorder.event(pool, EventType.NORMAL, "SuccessfulUpdate", f"Updated VM {vm.name}")
        return None

    async def _write_status(self, pool: Pool, vms: Sequence[VM], error: ScaleError | None) -> None:
        status = pool_status(pool, vms, error=error, now=self._clock())
        if status != pool.status:
            await self._write_owner(pool, dataclasses.replace(pool, status=status))
