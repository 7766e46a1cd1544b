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
from controller.pool.logic import (
    Pool,
    PoolPlan,
    check_pool,
    owned,
    plan_pool,
    pool_status,
    updated_vm,
    vm_body,
)
from controller.replicaset.logic import ScaleError
from shared.kube import (
    OWNER_INDEX,
    VMIS,
    VMPOOLS,
    VMS,
    AlreadyExists,
    ApiError,
    Conflict,
    EventType,
    Handlers,
    NotFound,
    Store,
    TransportError,
)
from shared.model import VirtualMachine

log = structlog.get_logger("controller.pool")

VM = VirtualMachine
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

    async def sync(self, key: str) -> None:
        pool = self._current(key)
        if pool is None:
            return
        vms = owned(pool, self._informers.vms.store.by_index(OWNER_INDEX, pool.uid))
        error: ScaleError | None = None
        if self.expectations.satisfied(key):
            error = await self._apply(pool, plan_pool(pool, vms))
        await self._write_status(pool, vms, error)
        if error is not None:
            self.queue.add_rate_limited(key)

    async def _apply(self, pool: Pool, plan: PoolPlan) -> ScaleError | None:
        if plan.delete:
            self.expectations.expect_deletions(pool.key, [vm.uid for vm in plan.delete])
        if plan.create:
            self.expectations.expect_creations(pool.key, len(plan.create))
        writes: list[Write] = [self._delete_owned(pool, vm) for vm in plan.delete]
        writes += [self._create(pool, i) for i in plan.create]
        writes += [self._update(pool, vm, restart=plan.restart) for vm in plan.update]
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(w) for w in writes]
        errors = [e for t in tasks if (e := t.result()) is not None]
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

    async def _update(self, pool: Pool, vm: VM, *, restart: bool) -> str | None:
        """Rewrite the VM to the template; a proactive update restarts its VMI too."""
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.update(VMS, updated_vm(pool, vm))
                if restart:
                    await self._client.delete(VMIS, vm.name, namespace=vm.namespace)
        except (NotFound, Conflict):
            return None  # changed or gone meanwhile: its event brings the pool back
        except (ApiError, TransportError, TimeoutError) as e:
            return f"updating VM {vm.name}: {e}"
        log.info("vm_updated", name=vm.name, restarted=restart)
        self._recorder.event(pool, EventType.NORMAL, "SuccessfulUpdate", f"Updated VM {vm.name}")
        return None

    async def _write_status(self, pool: Pool, vms: Sequence[VM], error: ScaleError | None) -> None:
        status = pool_status(pool, vms, error=error, now=self._clock())
        if status != pool.status:
            await self._write_owner(pool, dataclasses.replace(pool, status=status))
