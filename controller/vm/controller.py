"""The VM controller: keeps each VirtualMachine's VMI in line with its run strategy and
start/stop requests, and its status (printableStatus, conditions, crash-loop backoff) true.

    reconcile(key): VM and the VMI of its name from the caches → expectations satisfied?
                    → plan_vm() → VMI create or delete → one status write
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import structlog

from controller.config import TimingConfig
from controller.deps import Deps
from controller.errors import SyncError
from controller.owned import owner_handlers
from controller.recent import Recent
from controller.reconcile import Reconciler, refresher
from controller.vm import memorydump, volmig_io
from controller.vm.datavolumes import (
    Gate,
    gate,
    gated,
    template_names,
    templates_to_create,
    volume_datavolumes,
)
from controller.vm.hotplug import template_ops
from controller.vm.hotresources import HotplugLimits, with_ceilings
from controller.vm.liveupdate import live_ops, with_restart_required
from controller.vm.logic import Backoff, VMPlan, plan_vm
from controller.vm.receiver import restored_strategy, sent_away
from controller.vm.vmibody import vmi_from_template
from shared.clusterconfig import RolloutStrategy
from shared.kube import (
    DATAVOLUMES,
    PVCS,
    VMIS,
    VMS,
    AlreadyExists,
    ApiError,
    Conflict,
    DeleteOptions,
    EventType,
    Expectations,
    Handlers,
    Invalid,
    NotFound,
    PatchType,
    Resource,
    StatusWriter,
    TransportError,
    WorkQueue,
)
from shared.model import ConditionReason, VirtualMachine, VirtualMachineInstance
from shared.model.datavolume import DataVolume
from shared.model.memorydump import PVC_MEMORY_DUMP_ANNOTATION
from shared.revisions import Expansion, expansion

log = structlog.get_logger("controller.vm")


def owner_key(vmi: VirtualMachineInstance) -> str | None:
    """The key of the VM controlling this VMI, if a VM does."""
    ref = vmi.metadata.controller_ref()
    if ref is None or ref.kind != VirtualMachine.KIND or not ref.name:
        return None
    return f"{vmi.namespace}/{ref.name}"


class VMController(Reconciler):
    """Reconciles VirtualMachines against their VMIs."""

    kind = "vm"
    synchronized_on = "vms"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        expectations: Expectations,
        writer: StatusWriter[VirtualMachine],
        timing: TimingConfig,
        rollout: Callable[[], RolloutStrategy] = lambda: RolloutStrategy.LIVE_UPDATE,
        hotplug_limits: Callable[[], HotplugLimits] = HotplugLimits,
    ) -> None:
        super().__init__(deps, queue)
        # The KubeVirt CR's vmRolloutStrategy and liveUpdateConfiguration, read at each sync.
        self._rollout = rollout
        self._hotplug_limits = hotplug_limits
        self._expectations = expectations
        self._writer = writer
        self._recent: Recent[VirtualMachine] = Recent()
        self._backoff = Backoff(base=timing.start_backoff_base, cap=timing.start_backoff_max)

    def handlers(self) -> tuple[Handlers[VirtualMachine], Handlers[VirtualMachineInstance]]:
        """Callbacks for the VM and VMI informers."""
        vm_handlers: Handlers[VirtualMachine] = owner_handlers(
            self.enqueue, recent=self._recent, expectations=self._expectations
        )
        vmi_handlers: Handlers[VirtualMachineInstance] = Handlers(
            on_add=self._vmi_added,
            on_update=self._vmi_updated,
            on_delete=self._vmi_deleted,
        )
        return vm_handlers, vmi_handlers

    def _vmi_added(self, vmi: VirtualMachineInstance) -> None:
        key = owner_key(vmi)
        if key is not None:
            self._expectations.creation_observed(key)
        self._vmi_changed(vmi)

    def _vmi_updated(self, old: VirtualMachineInstance, new: VirtualMachineInstance) -> None:
        key = owner_key(new)
        if key is not None and new.metadata.is_deleting and not old.metadata.is_deleting:
            self._expectations.deletion_observed(key, new.uid)
        self._vmi_changed(new)

    def _vmi_changed(self, vmi: VirtualMachineInstance) -> None:
        # A VMI of a VM's name that the VM does not own is reported on that VM too.
        self.enqueue(owner_key(vmi) or (vmi.key if vmi.key in self._informers.vms.store else None))

    def _vmi_deleted(self, vmi: VirtualMachineInstance) -> None:
        key = owner_key(vmi)
        if key is not None:
            self._expectations.deletion_observed(key, vmi.uid)
        self._vmi_changed(vmi)

    async def sync(self, key: str) -> None:
        vm = self._recent.latest(self._informers.vms.store.get(key))
        if vm is None:
            return
        if not self._expectations.satisfied(key):
            return
        vmi = self._vmi_recent.latest(self._informers.vmis.store.get(key))
        plan = plan_vm(vm, vmi, now=self._clock(), backoff=self._backoff)
        if sent_away(vmi):  # its guest lives on in another VMI: never restarted here
            plan = dataclasses.replace(plan, create_vmi=False, delete_vmi_uid=None)
        plan = gated(plan, await self._datavolumes(vm), vmi, now=self._clock())
        owned = vmi if vmi is not None and owner_key(vmi) == key else None
        volumes = volmig_io.plan(self._informers, vm, owned, now=self._clock())
        if volumes.block_start:  # ManualRecoveryRequired (controller/vm/volmig.py)
            plan = dataclasses.replace(plan, create_vmi=False)
        await self._apply(vm, plan)
        if owned is not None:
            await self._follow_template(vm, owned)
            await volmig_io.apply(self._client, owned, volumes, now=self._clock())
        await self._memory_dump(vm, owned)
        await self._restore_run_strategy(vm, owned)
        status = with_restart_required(
            plan.status, vm, owned, strategy=self._rollout(), now=self._clock()
        )
        dump = memorydump.next_request(vm, owned)
        status = dataclasses.replace(status, memory_dump_request=dump)
        status = volmig_io.with_verdicts(status, vm, volumes, now=self._clock())
        if volumes.requeue_after is not None and plan.requeue_after is None:
            plan = dataclasses.replace(plan, requeue_after=volumes.requeue_after)
        plan = dataclasses.replace(plan, status=status)
        new = dataclasses.replace(vm, status=plan.status)
        if new.status == vm.status:
            self._requeue(key, plan)
            return
        try:
            refresh = refresher(self._client, VMS, VirtualMachine, key)
            written = await self._writer.write_status(vm, new, refresh=refresh)
        except NotFound:
            return
        if written is not vm:
            self._recent.remember(written)
        self._requeue(key, plan)

    async def _restore_run_strategy(
        self, vm: VirtualMachine, vmi: VirtualMachineInstance | None
    ) -> None:
        """A WaitAsReceiver VM whose guest arrived takes its restore-run-strategy; one
        whose guest went to another VMI is Halted."""
        strategy = restored_strategy(vm, vmi)
        if strategy is None:
            return
        body = {"spec": {"runStrategy": str(strategy)}}
        await self._patch(VMS, vm.name, body, vm=vm, kind=PatchType.MERGE)
        log.info("run_strategy_restored", strategy=str(strategy))

    async def _follow_template(self, vm: VirtualMachine, vmi: VirtualMachineInstance) -> None:
        """The running VMI's hotplugged volumes follow the template (vm_hotplug), and with
        LiveUpdate its affinity, tolerations and node selector (liveupdate.py)."""
        ops = [*template_ops(vm, vmi), *live_ops(vm, vmi, self._rollout())]
        if not ops:
            return
        try:
            await self._client.patch(VMIS, vmi.name, ops, namespace=vm.namespace,
                                     patch_type=PatchType.JSON)  # fmt: skip
        except (Invalid, Conflict) as e:  # changed meanwhile: its update event comes back
            log.info("vmi_hotplug_follow_retry", error=str(e))
            return
        except (ApiError, TransportError) as e:
            raise SyncError(ConditionReason.FAILED_UPDATE, f"VMI {vmi.key}: {e}") from e
        log.info("vmi_hotplug_followed_template")

    async def _memory_dump(self, vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> None:
        """The memory dump request's volume on the VMI and note on the claim
        (controller/vm/memorydump.py)."""
        request = vm.status.memory_dump_request
        if request is None or not request.claim_name:
            return
        note = memorydump.claim_annotation(vm)
        claim = self._informers.claims.store.get(f"{vm.namespace}/{request.claim_name}")
        if note is not None and claim is not None and claim.memory_dump != note:
            body = {"metadata": {"annotations": {PVC_MEMORY_DUMP_ANNOTATION: note}}}
            await self._patch(PVCS, request.claim_name, body, vm=vm, kind=PatchType.MERGE)
        ops = memorydump.vmi_ops(vm, vmi)
        if ops and vmi is not None:
            await self._patch(VMIS, vmi.name, ops, vm=vm, kind=PatchType.JSON)
            log.info("vmi_memory_dump_volume_changed", claim=request.claim_name)

    async def _patch(
        self, resource: Resource, name: str, body: Any, *, vm: VirtualMachine, kind: PatchType
    ) -> None:
        try:
            await self._client.patch(resource, name, body, namespace=vm.namespace, patch_type=kind)
        except (Invalid, Conflict, NotFound) as e:  # changed meanwhile: its event comes back
            log.info("memory_dump_patch_retry", error=str(e))
        except (ApiError, TransportError) as e:
            raise SyncError(ConditionReason.FAILED_UPDATE, f"{name}: {e}") from e

    def datavolume_handlers(self) -> Handlers[DataVolume]:
        """A DataVolume's changes re-sync the VMs that make or name it."""
        return Handlers(
            on_add=self._datavolume_changed,
            on_update=lambda old, new: self._datavolume_changed(new),
            on_delete=self._datavolume_changed,
        )

    def _datavolume_changed(self, dv: DataVolume) -> None:
        for vm in self._informers.vms.store.list():
            if vm.namespace == dv.namespace and dv.name in volume_datavolumes(vm):
                self.enqueue(vm.key)

    async def _datavolumes(self, vm: VirtualMachine) -> Gate:
        """Make the VM's missing dataVolumeTemplates; whether its DataVolumes are ready."""
        store = self._informers.datavolumes.store
        dvs = {
            name: store.get(f"{vm.namespace}/{name}")
            for name in {*volume_datavolumes(vm), *template_names(vm)}
        }
        existing = {name: dv for name, dv in dvs.items() if dv is not None}
        if not vm.metadata.is_deleting:
            for body in templates_to_create(vm, existing):
                await self._create_datavolume(vm, body)
        return gate(vm, dvs)

    async def _create_datavolume(self, vm: VirtualMachine, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            await self._client.create(DATAVOLUMES, body, namespace=vm.namespace)
        except AlreadyExists:
            return
        except (ApiError, TransportError) as e:
            message = f"Error creating DataVolume {name}: {e}"
            self._recorder.event(vm, EventType.WARNING, "FailedCreate", message)
            raise SyncError(ConditionReason.FAILED_CREATE, message) from e
        log.info("datavolume_created", datavolume=name)
        self._recorder.event(vm, EventType.NORMAL, "SuccessfulDataVolumeCreate",
                             f"Created DataVolume {name}")  # fmt: skip

    def _requeue(self, key: str, plan: VMPlan) -> None:
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    async def _apply(self, vm: VirtualMachine, plan: VMPlan) -> None:
        if plan.delete_vmi_uid is not None:
            await self._delete_vmi(vm, plan.delete_vmi_uid)
        if plan.create_vmi:
            await self._create_vmi(vm)

    async def _create_vmi(self, vm: VirtualMachine) -> None:
        named = vm.spec.instancetype is not None or vm.spec.preference is not None
        exp = await expansion(self._client, vm) if named else Expansion()
        body = vmi_from_template(vm, instancetype=exp.instancetype, preference=exp.preference)
        if self._rollout() is RolloutStrategy.LIVE_UPDATE:
            body = with_ceilings(body, self._hotplug_limits())
        self._expectations.expect_creations(vm.key, 1)
        try:
            await self._client.create(VMIS, body, namespace=vm.namespace)
        except AlreadyExists:
            return  # the cache lags; the VMI's add event settles the expectation
        except (ApiError, TransportError) as e:
            self._expectations.creation_observed(vm.key)
            message = f"Error creating virtual machine instance: {e}"
            self._recorder.event(vm, EventType.WARNING, "FailedCreate", message)
            raise SyncError(ConditionReason.FAILED_CREATE, f"VMI {vm.key}: {e}") from e
        log.info("vmi_created")
        message = (
            f"Started the virtual machine by creating the new virtual machine instance {vm.name}"
        )
        self._recorder.event(vm, EventType.NORMAL, "SuccessfulCreate", message)

    async def _delete_vmi(self, vm: VirtualMachine, uid: str) -> None:
        self._expectations.expect_deletions(vm.key, [uid])
        try:
            await self._client.delete(
                VMIS, vm.name, namespace=vm.namespace, options=DeleteOptions(uid=uid)
            )
        except (NotFound, Conflict):
            self._expectations.deletion_observed(vm.key, uid)
        except (ApiError, TransportError) as e:
            self._expectations.deletion_observed(vm.key, uid)
            message = f"Error deleting virtual machine instance {vm.name}: {e}"
            self._recorder.event(vm, EventType.WARNING, "FailedDelete", message)
            raise SyncError(ConditionReason.FAILED_DELETE, f"VMI {vm.key}: {e}") from e
        else:
            log.info("vmi_deleted", uid=uid)
            message = f"Stopped the virtual machine by deleting the virtual machine instance {uid}"
            self._recorder.event(vm, EventType.NORMAL, "SuccessfulDelete", message)
