"""start / stop / restart / migrate on a VM: KubeVirt's virt-api rules as pure functions.

    opts = parse_options(VMAction.STOP, body)          # StopOptions … or 400
    writes = plan(VMAction.STOP, opts, vm_dict, vmi)   # the object writes … or 404/409

The writes are the ones KubeVirt's virt-api makes (and virtctl-py used to make itself):
spec.runStrategy (or the deprecated spec.running) by merge patch, status.stateChangeRequests
by a JSON patch whose `test` op guards against a concurrent request, a VMIM to create.
Answers and messages follow virt-api's (`Operation cannot be fulfilled on
virtualmachine.kubevirt.io "demo": VM is already running`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from shared.actions import VMAction
from shared.apigroup import GROUP
from shared.model import RunStrategy, VirtualMachine, VirtualMachineInstance, VMIPhase
from virt_api.subresources.errors import BadRequest, Conflict, NotFound, VmiRef

VM_KIND = "virtualmachine"
DRY_RUN_ALL = "All"
MIGRATION_PREFIX = "kubevirt-migrate-vm-"
NOT_RUNNING = "VM is not running"
ALREADY_RUNNING = "VM is already running"
UNDERWAY = "unable to complete request: stop/start already underway"
# A WaitAsReceiver VM (a decentralized migration's receiving side): KubeVirt's virt-api
# has no case for it. start: "VM is already running" while its VMI waits, else accepted
# with nothing done; stop: accepted, only a grace period reaches the VMI (runStrategy
# kept); restart: "VM is not running" without a VMI, else accepted. KubeVirt records
# restart's stop/start requests, which its VM controller ignores while WaitAsReceiver
# (and would act on once the guest arrived): kubevirt-py writes none.
_RECEIVER = RunStrategy.WAIT_AS_RECEIVER


@dataclass(frozen=True, slots=True, kw_only=True)
class VmOptions:
    """The request body: Start/Stop/Restart/MigrateOptions, whichever the action takes."""

    dry_run: bool = False
    paused: bool = False  # StartOptions.paused
    grace_period: int | None = None  # StopOptions.gracePeriod, RestartOptions.gracePeriodSeconds
    added_node_selector: Mapping[str, str] = field(default_factory=dict)  # MigrateOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class VmWrites:
    """What to write, in this order; empty fields are not written."""

    vmi_patch: dict[str, Any] | None = None  # merge patch on the VMI (stop's grace period)
    spec_patch: dict[str, Any] | None = None  # merge patch on the VM
    status_ops: tuple[dict[str, Any], ...] = ()  # JSON patch on virtualmachines/status
    migration: dict[str, Any] | None = None  # a VMIM to create
    kill_pod_of: str | None = None  # the VMI UID whose launcher pod goes with grace 0


def vm_ref(namespace: str, name: str) -> VmiRef:
    """The StatusDetails of a failure about a VM (KubeVirt's group and kind)."""
    return VmiRef(namespace=namespace, name=name, group=GROUP, kind=VM_KIND)


def conflict(ref: VmiRef, why: str) -> Conflict:
    """apimachinery's NewConflict(virtualmachine.kubevirt.io, name, why)."""
    return Conflict(
        f'Operation cannot be fulfilled on {VM_KIND}.{GROUP} "{ref.name}": {why}', vmi=ref
    )


def vm_not_found(ref: VmiRef) -> NotFound:
    return NotFound(f'{VM_KIND}.{GROUP} "{ref.name}" not found', vmi=ref)


def parse_options(action: VMAction, body: bytes, ref: VmiRef) -> VmOptions:
    """The options in `body` (JSON or YAML; empty means defaults), or 400 as virt-api."""
    try:
        raw = yaml.safe_load(body.decode()) if body.strip() else {}
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise _unmarshal(e, ref) from e
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _unmarshal(f"expected an object, got {type(raw).__name__}", ref)
    try:
        opts = _options(action, raw)
    except (TypeError, ValueError) as e:
        raise _unmarshal(e, ref) from e
    if action is VMAction.RESTART and opts.grace_period is not None:
        if opts.grace_period > 0:
            raise BadRequest("For force restart, only gracePeriod=0 is supported for now", vmi=ref)
        if opts.grace_period < 0:
            raise BadRequest("gracePeriod has to be greater or equal to 0", vmi=ref)
    return opts


def _unmarshal(error: object, ref: VmiRef) -> BadRequest:
    return BadRequest(f"Can not unmarshal Request body to struct, error: {error}", vmi=ref)


def _options(action: VMAction, raw: Mapping[str, Any]) -> VmOptions:
    dry_run = raw.get("dryRun") or []
    if not isinstance(dry_run, list) or any(v != DRY_RUN_ALL for v in dry_run):
        raise ValueError(f"dryRun must be a list of {DRY_RUN_ALL!r}, got {dry_run!r}")
    grace_key = {VMAction.STOP: "gracePeriod", VMAction.RESTART: "gracePeriodSeconds"}
    grace = raw.get(grace_key.get(action, ""))
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise ValueError(f"{grace_key[action]} must be an integer, got {grace!r}")
    paused = raw.get("paused", False) if action is VMAction.START else False
    if not isinstance(paused, bool):
        raise ValueError(f"paused must be a boolean, got {paused!r}")
    selector = raw.get("addedNodeSelector") or {} if action is VMAction.MIGRATE else {}
    if not isinstance(selector, dict):
        raise ValueError(f"addedNodeSelector must be an object, got {selector!r}")
    return VmOptions(
        dry_run=bool(dry_run),
        paused=paused,
        grace_period=grace,
        added_node_selector={str(k): str(v) for k, v in selector.items()},
    )


def plan(
    action: VMAction,
    opts: VmOptions,
    vm: Mapping[str, Any],
    vmi: VirtualMachineInstance | None,
) -> VmWrites:
    """The writes `action` makes on `vm` (the API's object) and its VMI, or the refusal."""
    typed = VirtualMachine.from_dict(vm)
    ref = vm_ref(typed.namespace or "", typed.name or "")
    planner = {
        VMAction.START: _start,
        VMAction.STOP: _stop,
        VMAction.RESTART: _restart,
        VMAction.MIGRATE: _migrate,
    }[action]
    return planner(_Subject(ref=ref, raw=vm, vm=typed, vmi=vmi), opts)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Subject:
    ref: VmiRef
    raw: Mapping[str, Any]
    vm: VirtualMachine
    vmi: VirtualMachineInstance | None

    @property
    def strategy(self) -> RunStrategy:
        return self.vm.spec.effective_run_strategy()

    @property
    def phase(self) -> VMIPhase:
        return self.vmi.status.phase_or_unset if self.vmi is not None else VMIPhase.UNSET

    @property
    def live(self) -> bool:
        return self.vmi is not None and not self.vmi.is_final()

    def running_patch(self, strategy: RunStrategy) -> dict[str, Any]:
        """spec.running when the VM still uses it (both fields are refused), else runStrategy."""
        if self.vm.spec.running is not None and self.vm.spec.run_strategy is None:
            return {"spec": {"running": strategy is not RunStrategy.HALTED}}
        return {"spec": {"runStrategy": str(strategy)}}

    def stop_request(self) -> dict[str, Any]:
        assert self.vmi is not None
        return {"action": "Stop", "uid": self.vmi.uid or ""}


def _start(s: _Subject, opts: VmOptions) -> VmWrites:
    if s.live and s.phase not in (VMIPhase.UNKNOWN, VMIPhase.UNSET):
        raise conflict(s.ref, ALREADY_RUNNING)
    strategy = s.strategy
    if strategy is RunStrategy.HALTED:
        patch = s.running_patch(RunStrategy.ALWAYS)
        if opts.paused:
            patch["spec"]["template"] = {"spec": {"startStrategy": "Paused"}}
        return VmWrites(spec_patch=patch)
    if strategy in (RunStrategy.MANUAL, RunStrategy.RERUN_ON_FAILURE):
        if strategy is RunStrategy.RERUN_ON_FAILURE and s.phase is VMIPhase.FAILED:
            raise conflict(s.ref, f"{strategy} does not support starting VM from failed state")
        if opts.paused:
            raise BadRequest(
                "starting paused is supported for runStrategy Halted only in kubevirt-py", vmi=s.ref
            )
        finished = s.vmi is not None and (
            s.phase is VMIPhase.SUCCEEDED
            if strategy is RunStrategy.RERUN_ON_FAILURE
            else s.vmi.is_final()
        )
        start = {"action": "Start"}
        changes = [s.stop_request(), start] if finished else [start]
        return VmWrites(status_ops=change_request_ops(s.raw, changes, ref=s.ref))
    if strategy is _RECEIVER:  # virt-api has no case for it: accepted, nothing done
        return VmWrites()
    raise conflict(s.ref, f"{strategy} does not support manual start requests")


def _stop(s: _Subject, opts: VmOptions) -> VmWrites:
    strategy, grace = s.strategy, opts.grace_period
    vmi_patch = None
    if s.live and grace is not None:
        vmi_patch = {"spec": {"terminationGracePeriodSeconds": grace}}
    if strategy in (RunStrategy.HALTED, RunStrategy.MANUAL):
        if not s.live:
            raise conflict(s.ref, NOT_RUNNING)
        assert s.vmi is not None
        old = s.vmi.spec.termination_grace_period_seconds
        if strategy is RunStrategy.HALTED and (grace is None or (old is not None and grace >= old)):
            raise conflict(
                s.ref, f"{strategy} only supports manual stop requests with a shorter graceperiod"
            )
        ops = change_request_ops(s.raw, [s.stop_request()], ref=s.ref)
        return VmWrites(vmi_patch=vmi_patch, status_ops=ops)
    if strategy is _RECEIVER:  # the runStrategy stays; only a grace period is written
        return VmWrites(vmi_patch=vmi_patch)
    return VmWrites(vmi_patch=vmi_patch, spec_patch=s.running_patch(RunStrategy.HALTED))


def _restart(s: _Subject, opts: VmOptions) -> VmWrites:
    if s.strategy in (RunStrategy.HALTED, RunStrategy.ONCE):
        raise conflict(s.ref, f"{s.strategy} does not support manual restart requests")
    if s.vmi is None:
        raise conflict(s.ref, NOT_RUNNING)
    if s.strategy is _RECEIVER:  # accepted, no stop/start requests written
        return VmWrites()
    ops = change_request_ops(s.raw, [s.stop_request(), {"action": "Start"}], ref=s.ref)
    kill = s.vmi.uid if opts.grace_period == 0 else None
    return VmWrites(status_ops=ops, kill_pod_of=kill)


def _migrate(s: _Subject, opts: VmOptions) -> VmWrites:
    if s.vmi is None:
        raise NotFound(f'virtualmachineinstance.{GROUP} "{s.ref.name}" not found', vmi=s.ref)
    if s.phase is not VMIPhase.RUNNING:
        raise conflict(s.ref, NOT_RUNNING)
    selector = opts.added_node_selector
    return VmWrites(migration=migration(s.ref.namespace, s.ref.name, added_node_selector=selector))


def migration(
    namespace: str, vmi_name: str, *, added_node_selector: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The VMIM virt-api creates (generated name, as KubeVirt's); MigrateOptions'
    addedNodeSelector is its spec's (the VMIM webhook checks the labels)."""
    spec: dict[str, Any] = {"vmiName": vmi_name}
    if added_node_selector:
        spec["addedNodeSelector"] = dict(added_node_selector)
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"generateName": MIGRATION_PREFIX, "namespace": namespace},
        "spec": spec,
    }


def change_request_ops(
    vm: Mapping[str, Any], changes: Sequence[Mapping[str, Any]], *, ref: VmiRef
) -> tuple[dict[str, Any], ...]:
    """virt-api's getChangeRequestJson: add the requests, guarded by a `test` of the old list.

    A VM without any status gets one (a test of a missing parent fails); a lone Stop
    replaces pending requests, anything else refuses while some are pending.
    """
    status = vm.get("status") or {}
    value = [dict(c) for c in changes]
    if not status:
        return ({"op": "add", "path": "/status", "value": {"stateChangeRequests": value}},)
    old = status.get("stateChangeRequests")
    verb = "add"
    if old:
        if not (len(changes) == 1 and changes[0].get("action") == "Stop"):
            raise conflict(ref, UNDERWAY)
        verb = "replace"
    path = "/status/stateChangeRequests"
    return (
        {"op": "test", "path": path, "value": json.loads(json.dumps(old))},
        {"op": verb, "path": path, "value": value},
    )
