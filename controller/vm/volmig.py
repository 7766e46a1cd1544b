"""Volume migration decisions (pure): a running VM with `updateVolumesStrategy: Migration`
whose template points a volume at another claim has that disk copied to the new claim by
a live migration with storage copy, as KubeVirt does (docs/volume-migration.md).

    template claim ≠ VMI claim, both claims known, destination not smaller
        → VMI status: migratedVolumes (source → destination), VolumesChange=True
        → VMI spec: the volume names the destination claim (the target pod mounts it)
        → VM status.volumeUpdateState lists the volumes (for a manual recovery)
    VolumesChange=True and LiveMigratable=True, no migration of it under way
        → a VMIM annotated kubevirt.io/volume-update-migration (retried with back-off
          after a failure: the guest stays on the source disk meanwhile)
    its migration completed → VolumesChange dropped, volumeUpdateState cleared
    the template names the source claims again → cancelled (KubeVirt's way): the VMI's
        volumes go back, its VMIM under way is deleted, VolumesChange=False
    the VMI gone while one was pending → ManualRecoveryRequired on the VM, which is not
        started again until its template names the source claims again
A destination that does not exist or is smaller than the source is refused before
anything is written: VolumesChange=False on the VM naming the reason; the guest keeps
its disk. Without the Migration strategy a changed claim sets RestartRequired.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controller.services.volumes.claims import Claim
from controller.vm.liveupdate import RESTART_REQUIRED_REASON
from shared.model import (
    ConditionStatus,
    MigrationPhase,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMConditionType,
    VMIConditionType,
    VMIPhase,
    parse_time,
)
from shared.model.volmig import (
    VOLUME_UPDATE_MIGRATION,
    StorageMigratedVolumeInfo,
    UpdateVolumesStrategy,
    VolumeMigrationState,
    VolumeUpdateState,
)

REFUSED = "VolumeMigrationRefused"
IN_PROGRESS = "VolumeMigrationInProgress"
CANCELLED = "VolumesChangeCancellation"
RECOVERY = "VolumesUpdateInterrupted"
BACKOFF_BASE = 10.0
BACKOFF_CAP = 300.0

ClaimOf = Callable[[str], Claim | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A condition the VM carries for its volume migration (True or False, why)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMigrationPlan:
    """What one sync does for the VM's volume migration."""

    # The VMI's new migratedVolumes and whether VolumesChange becomes True (start) or goes
    # (finished); None: leave the VMI status.
    migrated: tuple[StorageMigratedVolumeInfo, ...] | None = None
    volumes_change: bool | None = None
    # The VMI's new spec.volumes (raw), None: leave it.
    volumes: list[dict[str, Any]] | None = None
    create_migration: bool = False
    cancelled: bool = False  # VolumesChange=False, VolumesChangeCancellation
    abort: tuple[str, ...] = ()  # names of its unfinished VMIMs, deleted (cancelled)
    state: VolumeUpdateState | None = None
    verdicts: tuple[Verdict, ...] = ()
    block_start: bool = False
    requeue_after: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMigrationInputs:
    """Everything one decision reads."""

    vm: VirtualMachine
    vmi: VirtualMachineInstance | None  # the VM's own VMI
    claim_of: ClaimOf  # a claim of the VM's namespace by name (the informer's cache)
    migrations: Sequence[VirtualMachineInstanceMigration] = field(default_factory=tuple)
    now: datetime


def plan_volume_migration(inp: VolumeMigrationInputs) -> VolumeMigrationPlan:
    """The plan for one VM (an empty plan with the VM's state as is when nothing to do)."""
    vm, vmi = inp.vm, inp.vmi
    kept = vm.status.volume_update_state
    if vmi is None or vmi.is_final():
        return _plan_stopped(vm)
    if vm.spec.update_volumes_strategy is not UpdateVolumesStrategy.MIGRATION:
        return VolumeMigrationPlan(state=kept, verdicts=_restart_required(vm, vmi))
    if vmi.metadata.is_deleting or vmi.status.phase is not VMIPhase.RUNNING:
        return VolumeMigrationPlan(state=kept)
    if vmi.status.condition_is_true(VMIConditionType.VOLUMES_CHANGE) or _recorded(vm, vmi):
        return _plan_pending(inp, vmi)
    return _plan_change(inp, vmi)


def _restart_required(vm: VirtualMachine, vmi: VirtualMachineInstance) -> tuple[Verdict, ...]:
    """Replacement (KubeVirt's default): a running VM whose template names another claim
    gets RestartRequired naming the volumes; the new claim is used from the next start."""
    running = running_claims(vmi)
    moved = sorted(
        f"volume {n}: claim {running[n]} → {c}"
        for n, c in template_claims(vm).items()
        if n in running and running[n] != c
    )
    if not moved or vmi.metadata.is_deleting:
        return ()
    message = "; ".join(moved) + " (updateVolumesStrategy is not Migration)"
    return (Verdict(type=str(VMConditionType.RESTART_REQUIRED), status=ConditionStatus.TRUE,
                    reason=RESTART_REQUIRED_REASON, message=message),)  # fmt: skip


def _recorded(vm: VirtualMachine, vmi: VirtualMachineInstance) -> bool:
    """The VM records a pending migration of the VMI's migratedVolumes (its VolumesChange
    condition lost to a concurrent status write is put back)."""
    state = vm.status.volume_update_state
    pending = state.volume_migration_state if state is not None else None
    return bool(pending and pending.migrated_volumes == vmi.status.migrated_volumes)


def _plan_stopped(vm: VirtualMachine) -> VolumeMigrationPlan:
    """No running VMI: a migration left pending needs the user (KubeVirt's rule)."""
    state = vm.status.volume_update_state
    pending = state.volume_migration_state if state is not None else None
    if pending is None or not pending.migrated_volumes:
        return VolumeMigrationPlan()
    claims = template_claims(vm)
    if all(claims.get(v.volume_name or "") == v.source_claim for v in pending.migrated_volumes):
        return VolumeMigrationPlan()  # the template names the source claims again
    names = ", ".join(f"{v.volume_name} ({v.destination_claim})" for v in pending.migrated_volumes)
    message = (
        f"the VMI stopped before the volume migration of {names} completed: the destination "
        "claims may hold a partial copy; set the volumes back to their source claims"
    )
    kind = str(VMConditionType.MANUAL_RECOVERY_REQUIRED)
    verdict = Verdict(type=kind, status=ConditionStatus.TRUE, reason=RECOVERY, message=message)
    return VolumeMigrationPlan(state=state, verdicts=(verdict,), block_start=True)


def _plan_pending(inp: VolumeMigrationInputs, vmi: VirtualMachineInstance) -> VolumeMigrationPlan:
    """VolumesChange=True: finish once its migration completed, cancel when the template
    went back, else (re)start one."""
    ours = [m for m in inp.migrations if VOLUME_UPDATE_MIGRATION in m.metadata.annotations]
    since = _changed_at(vmi)
    # Any migration of the VMI since the change began carried the copy (the handler
    # passes migratedVolumes to every one while VolumesChange=True), an evacuation too.
    mine = {m.uid for m in inp.migrations if _after(m, since)}
    done = vmi.status.migration_state
    if done is not None and done.migration_uid in mine and done.completed and not done.failed:
        return VolumeMigrationPlan(volumes_change=False, state=None)
    cancel = _plan_cancel(inp.vm, vmi, ours)
    if cancel is not None:
        return cancel
    state = inp.vm.status.volume_update_state
    if not vmi.status.condition_is_true(VMIConditionType.VOLUMES_CHANGE):
        return VolumeMigrationPlan(volumes_change=True, state=state)
    dest = {v.volume_name or "": v.destination_claim or "" for v in vmi.status.migrated_volumes}
    if any(running_claims(vmi).get(n) != c for n, c in dest.items()):
        # The spec write after the status one did not land: never migrate before it has,
        # the target pod would mount the source claim.
        return VolumeMigrationPlan(state=state, volumes=_pointed(vmi, dest))
    return _plan_attempt(inp, vmi, ours, since=since)


def _plan_attempt(
    inp: VolumeMigrationInputs,
    vmi: VirtualMachineInstance,
    ours: Sequence[VirtualMachineInstanceMigration],
    *,
    since: datetime | None,
) -> VolumeMigrationPlan:
    """A VMIM once the VMI may migrate and none runs, after the back-off."""
    state = inp.vm.status.volume_update_state
    if any(not m.is_final() for m in inp.migrations):
        return VolumeMigrationPlan(state=state)
    if not vmi.status.condition_is_true(VMIConditionType.LIVE_MIGRATABLE):
        return VolumeMigrationPlan(state=state)  # the handler has not seen the change yet
    wait = _backoff(ours, since=since, now=inp.now)
    if wait > 0:
        return VolumeMigrationPlan(state=state, requeue_after=wait)
    return VolumeMigrationPlan(state=state, create_migration=True)


def _after(m: VirtualMachineInstanceMigration, since: datetime | None) -> bool:
    """Created for the current volume change (not an earlier one's)."""
    created = _created(m)
    return created is not None and (since is None or created >= since)


def _plan_cancel(
    vm: VirtualMachine,
    vmi: VirtualMachineInstance,
    ours: Sequence[VirtualMachineInstanceMigration],
) -> VolumeMigrationPlan | None:
    """The template names every migrated volume's source claim again: KubeVirt's
    cancellation. The VMI's volumes go back, its VMIMs under way are deleted (aborted:
    the guest stays on the source disk), VolumesChange=False."""
    migrated = vmi.status.migrated_volumes
    claims = template_claims(vm)
    if not migrated or any(claims.get(v.volume_name or "") != v.source_claim for v in migrated):
        return None
    back = {v.volume_name or "": v.source_claim or "" for v in migrated}
    return VolumeMigrationPlan(
        volumes_change=False, cancelled=True, volumes=_pointed(vmi, back),
        abort=tuple(m.name for m in ours if not m.is_final()),
    )  # fmt: skip


def _changed_at(vmi: VirtualMachineInstance) -> datetime | None:
    cond = vmi.status.condition(VMIConditionType.VOLUMES_CHANGE)
    try:
        return parse_time(cond.last_transition_time) if cond and cond.last_transition_time else None
    except ValueError:
        return None


def _created(m: VirtualMachineInstanceMigration) -> datetime | None:
    try:
        stamp = m.metadata.creation_timestamp
        return parse_time(stamp) if stamp else None
    except ValueError:
        return None


def _backoff(
    ours: Sequence[VirtualMachineInstanceMigration], *, since: datetime | None, now: datetime
) -> float:
    """Seconds until the next attempt: 10 s after the first failure, doubling to 5 min."""
    failed = [
        at
        for m in ours
        if m.status.phase_or_unset is MigrationPhase.FAILED
        and _after(m, since)
        and (at := _created(m)) is not None
    ]
    if not failed:
        return 0.0
    delay = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (len(failed) - 1))
    return max(0.0, (max(failed) + timedelta(seconds=delay) - now).total_seconds())


def template_claims(vm: VirtualMachine) -> dict[str, str]:
    """Volume name → claim name of the template's claim volumes (not hotplugged)."""
    return {
        v.name: v.claim.claim_name
        for v in vm.spec.template.spec.volumes
        if v.name and v.claim is not None and v.claim.claim_name and not v.is_hotplug
    }


def running_claims(vmi: VirtualMachineInstance) -> dict[str, str]:
    """Volume name → claim name of the VMI's claim volumes (not hotplugged)."""
    return {
        v.name: v.claim.claim_name
        for v in vmi.spec.volumes
        if v.name and v.claim is not None and v.claim.claim_name and not v.is_hotplug
    }


def _plan_change(inp: VolumeMigrationInputs, vmi: VirtualMachineInstance) -> VolumeMigrationPlan:
    """A template claim that differs from the running VMI's: start, or refuse saying why."""
    wanted = template_claims(inp.vm)
    running = running_claims(vmi)
    changed = {n: (running[n], c) for n, c in wanted.items() if n in running and running[n] != c}
    if not changed:
        return VolumeMigrationPlan()
    infos, problems = [], []
    for name, (source, dest) in sorted(changed.items()):
        info, problem = _describe(name, source, dest, inp.claim_of)
        if problem is not None:
            problems.append(problem)
        elif info is not None:
            infos.append(info)
    if problems:
        verdict = Verdict(type=str(VMIConditionType.VOLUMES_CHANGE), status=ConditionStatus.FALSE,
                          reason=REFUSED, message="; ".join(problems))  # fmt: skip
        return VolumeMigrationPlan(verdicts=(verdict,), requeue_after=BACKOFF_BASE)
    migrated = tuple(infos)
    pending = VolumeMigrationState(migrated_volumes=migrated)
    state = VolumeUpdateState(volume_migration_state=pending)
    return VolumeMigrationPlan(
        migrated=migrated, volumes_change=True, volumes=_new_volumes(inp.vm, vmi, changed),
        state=state,
    )  # fmt: skip


def _describe(
    volume: str, source: str, dest: str, claim_of: ClaimOf
) -> tuple[StorageMigratedVolumeInfo | None, str | None]:
    """The migrated volume's info, or why it cannot be migrated."""
    src, dst = claim_of(source), claim_of(dest)
    if dst is None:
        return None, f"volume {volume}: destination claim {dest} does not exist"
    if src is None:
        return None, f"volume {volume}: source claim {source} does not exist"
    src_bytes, dst_bytes = src.disk_bytes, dst.disk_bytes
    if src_bytes is not None and dst_bytes is not None and dst_bytes < src_bytes:
        return None, (
            f"volume {volume}: destination claim {dest} ({_size(dst)}) is smaller than "
            f"source claim {source} ({_size(src)})"
        )
    info = StorageMigratedVolumeInfo(
        volume_name=volume, source_pvc_info=src.info(), destination_pvc_info=dst.info()
    )
    return info, None


def _size(claim: Claim) -> str:
    return claim.capacity.get("storage") or claim.requests.get("storage") or "unknown size"


def _new_volumes(
    vm: VirtualMachine, vmi: VirtualMachineInstance, changed: Collection[str]
) -> list[dict[str, Any]]:
    """The VMI's spec.volumes with each changed volume as the template has it."""
    template = {v.name: v.to_dict() for v in vm.spec.template.spec.volumes}
    return [
        template[v.name] if v.name in changed and v.name in template else v.to_dict()
        for v in vmi.spec.volumes
    ]


def _pointed(vmi: VirtualMachineInstance, claims: Mapping[str, str]) -> list[dict[str, Any]]:
    """The VMI's spec.volumes with each volume of `claims` naming that claim."""
    out = []
    for v in vmi.spec.volumes:
        raw = v.to_dict()
        claim = claims.get(v.name or "")
        if claim and "persistentVolumeClaim" in raw:
            raw["persistentVolumeClaim"] = {**raw["persistentVolumeClaim"], "claimName": claim}
        elif claim and "dataVolume" in raw:
            raw["dataVolume"] = {**raw["dataVolume"], "name": claim}
        out.append(raw)
    return out
