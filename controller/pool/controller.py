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

from controller.deps import Deps
from controller.owned import WRITE_TIMEOUT, FleetReconciler
from controller.pool import preserve
from controller.pool.keeper import Keeper
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
    OWNER_INDEX,
    VMIS,
    VMPOOLS,
    VMS,
    AlreadyExists,
    ApiError,
    Conflict,
    DeleteOptions,
    EventType,
    Expectations,
    Handlers,
    NotFound,
    StatusWriter,
    Store,
    TransportError,
    WorkQueue,
)
from shared.model import VirtualMachine, VirtualMachineInstance

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

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        expectations: Expectations,
        writer: StatusWriter[Pool],
    ) -> None:
        super().__init__(deps, queue=queue, expectations=expectations, writer=writer)
        stores = self._informers
        self._keeper = Keeper(
            self._client, datavolumes=stores.datavolumes.store, vms=stores.vms.store
        )

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
        self._stray(vm, key)

    def _vm_updated(self, vm: VM) -> None:
        if vm.metadata.is_deleting:
            self._owned_deleted(vm)
            self._stray(vm, self._owner(vm))
        else:
            self.enqueue(self._owner(vm))

    def _stray(self, vm: VM, key: str | None) -> None:
        """A held VM being deleted whose pool is gone: its pool's key synced to free it."""
        if key is None and vm.metadata.is_deleting and preserve.held(vm):
            self._keeper.flag_stray(vm)
            ref = vm.metadata.controller_ref()
            self.enqueue(f"{vm.namespace}/{ref.name}" if ref is not None else None)

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
        await self._keeper.release_strays(key, pool)
        if pool is None:
            return
        vms = owned(pool, self._informers.vms.store.by_index(OWNER_INDEX, pool.uid))
        failed = await self._keeper.finish(pool, vms)
        error = ScaleError(reason="FailedDelete", message=failed[0]) if failed else None
        if self.expectations.satisfied(key):
            vmis = self._informers.vmis.store
            world = World(
                vmis={vm.name: v for vm in vms if (v := vmis.get(vm.key)) is not None},
                now=self._clock(),
            )
            plan = plan_pool(pool, vms, world=world)
            error = await self._apply(pool, plan) or error
            if not (pool.spec.paused or pool.metadata.is_deleting):
                kept = [vm for vm in vms if vm not in plan.delete]
                await self._keeper.adopt(pool, kept)
                await self._keeper.hold(pool, kept)
            wait = next_heal_check(vms, pool.spec.autohealing, now=world.now)
            if wait is not None:  # a failing VM reaches minFailingToStartDuration then
                self.queue.add_after(key, wait + 1)
        await self._write_status(pool, vms, error)
        if error is not None:
            self.queue.add_rate_limited(key)

    async def _apply(self, pool: Pool, plan: PoolPlan) -> ScaleError | None:
        kept, failed = await self._keeper.let_go(pool, plan.delete)
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
