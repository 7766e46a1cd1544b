"""Volume migration decisions (controller/vm/volmig.py): a running VM with strategy
Migration whose template names another claim starts a migration with storage copy
(migratedVolumes, VolumesChange, the VMI's volumes), is refused naming the reason when the
destination is smaller or missing, creates its VMIM once LiveMigratable, retries with
back-off, finishes when the migration completed, and asks for a manual recovery when the
VMI stopped half-way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller.services.volumes.claims import Claim
from controller.vm.volmig import (
    REFUSED,
    VolumeMigrationInputs,
    VolumeMigrationPlan,
    plan_volume_migration,
)
from controller.vm.volmig_io import _status_ops, with_verdicts
from shared.model import (
    ConditionStatus,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMCondition,
    VMStatus,
)
from shared.model.volmig import VOLUME_UPDATE_MIGRATION

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _spec(claim: str) -> dict[str, Any]:
    return {
        "domain": {"devices": {"disks": [{"name": "data", "disk": {"bus": "virtio"}}]}},
        "volumes": [
            {"name": "boot", "containerDisk": {"image": "img"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
        ],
    }


def _vm(claim: str, *, strategy: str | None = "Migration", status: Any = None) -> VirtualMachine:
    spec: dict[str, Any] = {"template": {"spec": _spec(claim)}}
    if strategy:
        spec["updateVolumesStrategy"] = strategy
    meta = {"name": "vm", "namespace": "ns", "uid": "u"}
    return VirtualMachine.from_dict({"metadata": meta, "spec": spec, "status": status or {}})


def _migrated(source: str = "src", dest: str = "dst") -> list[dict[str, Any]]:
    return [{"volumeName": "data", "sourcePVCInfo": {"claimName": source},
             "destinationPVCInfo": {"claimName": dest}}]  # fmt: skip


def _vmi(claim: str, *, conditions: tuple[str, ...] = (), **status: Any) -> VirtualMachineInstance:
    conds = [
        {"type": c, "status": "True", "lastTransitionTime": "2026-11-29T11:00:00Z"}
        for c in conditions
    ]
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": _spec(claim),
        "status": {"phase": "Running", "conditions": conds, **status},
    })  # fmt: skip


def _claim(name: str, size: str, *, mode: str = "Filesystem") -> Claim:
    return Claim.from_dict({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"volumeMode": mode, "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Bound", "capacity": {"storage": size},
                   "accessModes": ["ReadWriteOnce"]},
    })  # fmt: skip


CLAIMS = {"src": _claim("src", "1Gi"), "dst": _claim("dst", "2Gi", mode="Block"),
          "small": _claim("small", "16Mi")}  # fmt: skip


def _migration(uid: str, *, phase: str, created: str) -> VirtualMachineInstanceMigration:
    return VirtualMachineInstanceMigration.from_dict({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid, "creationTimestamp": created,
                     "annotations": {VOLUME_UPDATE_MIGRATION: "vm"}},
        "spec": {"vmiName": "vm"}, "status": {"phase": phase},
    })  # fmt: skip


def _plan(
    vm: VirtualMachine,
    vmi: VirtualMachineInstance | None,
    migrations: tuple[VirtualMachineInstanceMigration, ...] = (),
) -> VolumeMigrationPlan:
    inputs = VolumeMigrationInputs(
        vm=vm, vmi=vmi, claim_of=CLAIMS.get, migrations=migrations, now=NOW
    )
    return plan_volume_migration(inputs)


def test_a_changed_claim_starts_a_volume_migration() -> None:
    """The template names another claim: migratedVolumes lists source and destination
    (their claim infos), VolumesChange becomes True, the VMI's volume names the
    destination (the other volumes as they were) and the VM records the volumes."""
    plan = _plan(_vm("dst"), _vmi("src"))
    assert plan.volumes_change is True and not plan.create_migration
    (info,) = plan.migrated or ()
    assert (info.volume_name, info.source_claim, info.destination_claim) == ("data", "src", "dst")
    assert info.destination_pvc_info is not None
    assert info.destination_pvc_info.volume_mode == "Block"
    assert plan.volumes == [
        {"name": "boot", "containerDisk": {"image": "img"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "dst"}},
    ]
    assert plan.state is not None and plan.state.volume_migration_state is not None
    assert plan.state.volume_migration_state.migrated_volumes == plan.migrated


@pytest.mark.parametrize(
    ("dest", "message"),
    [
        pytest.param("small", "volume data: destination claim small (16Mi) is smaller than "
                     "source claim src (1Gi)", id="smaller"),
        pytest.param("gone", "volume data: destination claim gone does not exist", id="absent"),
    ],
)  # fmt: skip
def test_a_bad_destination_is_refused_naming_the_reason(dest: str, message: str) -> None:
    """A destination smaller than the source, or absent, is refused: nothing is written
    to the VMI (the guest keeps its disk) and the VM's VolumesChange=False says why."""
    plan = _plan(_vm(dest), _vmi("src"))
    assert (plan.migrated, plan.volumes, plan.volumes_change, plan.create_migration) == (
        None, None, None, False,
    )  # fmt: skip
    (verdict,) = plan.verdicts
    assert (verdict.type, verdict.status, verdict.reason) == (
        "VolumesChange", ConditionStatus.FALSE, REFUSED,
    )  # fmt: skip
    assert verdict.message == message
    status = with_verdicts(VMStatus(), _vm(dest), plan, now=NOW)
    (cond,) = status.conditions
    assert (cond.type, cond.status, cond.message) == ("VolumesChange", "False", message)


def test_without_the_migration_strategy_a_restart_is_required() -> None:
    """Replacement (KubeVirt's default) or no strategy: nothing is migrated, the VM gets
    RestartRequired naming the volume and both claims (kept with another field's)."""
    for strategy in (None, "Replacement"):
        plan = _plan(_vm("dst", strategy=strategy), _vmi("src"))
        assert (plan.migrated, plan.volumes, plan.create_migration) == (None, None, False)
        (verdict,) = plan.verdicts
        assert (verdict.type, verdict.status) == ("RestartRequired", ConditionStatus.TRUE)
        assert verdict.message.startswith("volume data: claim src → dst")
    other = VMStatus(conditions=(VMCondition(type="RestartRequired", status=ConditionStatus.TRUE,
                                             message="a field: spec.x"),))  # fmt: skip
    status = with_verdicts(other, _vm("dst", strategy=None), plan, now=NOW)
    (cond,) = status.conditions
    assert cond.message is not None and cond.message.startswith("a field: spec.x; volume data")
    assert _plan(_vm("src", strategy=None), _vmi("src")) == VolumeMigrationPlan()


def test_the_migration_is_created_once_the_vmi_is_migratable() -> None:
    """VolumesChange=True: no VMIM while LiveMigratable is not True (the handler has not
    seen the change yet) or another migration of the VMI is under way; then one."""
    pending = {"migratedVolumes": _migrated()}
    waiting = _plan(_vm("dst"), _vmi("dst", conditions=("VolumesChange",), **pending))
    assert not waiting.create_migration
    ready = _vmi("dst", conditions=("VolumesChange", "LiveMigratable"), **pending)
    assert _plan(_vm("dst"), ready).create_migration
    running = _migration("m1", phase="Running", created="2026-11-29T11:59:00Z")
    assert not _plan(_vm("dst"), ready, (running,)).create_migration


def test_a_failed_migration_is_retried_after_a_back_off() -> None:
    """After a failure the next VMIM waits 10 s, after two failures 20 s (the guest runs on
    the source disk meanwhile)."""
    ready = _vmi("dst", conditions=("VolumesChange", "LiveMigratable"),
                 migratedVolumes=_migrated())  # fmt: skip
    one = (_migration("m1", phase="Failed", created="2026-11-29T11:59:55Z"),)
    plan = _plan(_vm("dst"), ready, one)
    assert not plan.create_migration and plan.requeue_after == pytest.approx(5.0)
    two = (*one, _migration("m2", phase="Failed", created="2026-11-29T11:59:50Z"))
    assert _plan(_vm("dst"), ready, two).requeue_after == pytest.approx(15.0)
    old = (_migration("m1", phase="Failed", created="2026-11-29T11:58:00Z"),)
    assert _plan(_vm("dst"), ready, old).create_migration


def test_a_completed_migration_finishes_the_volume_change() -> None:
    """The VMI's migrationState names our VMIM, completed: VolumesChange goes, the VM's
    volumeUpdateState is cleared; migratedVolumes stay on the VMI."""
    state = {"migrationUid": "m1", "completed": True}
    vmi = _vmi("dst", conditions=("VolumesChange", "LiveMigratable"),
               migratedVolumes=_migrated(), migrationState=state)  # fmt: skip
    done = (_migration("m1", phase="Succeeded", created="2026-11-29T11:59:00Z"),)
    plan = _plan(_vm("dst"), vmi, done)
    assert (plan.volumes_change, plan.state, plan.create_migration) == (False, None, False)
    ops = _status_ops(vmi, plan, now=NOW)
    conditions = next(o["value"] for o in ops if o["op"] == "add")
    assert [c["type"] for c in conditions] == ["LiveMigratable"]


def test_a_lost_volumes_change_condition_is_put_back() -> None:
    """The VM records a pending migration of the VMI's migratedVolumes but the VMI lost its
    VolumesChange condition (a concurrent status write): it is set True again."""
    pending = {"volumeMigrationState": {"migratedVolumes": _migrated()}}
    vm = _vm("dst", status={"volumeUpdateState": pending})
    plan = _plan(vm, _vmi("dst", migratedVolumes=_migrated()))
    assert plan.volumes_change is True and plan.migrated is None and plan.volumes is None


def test_a_vmi_gone_mid_migration_requires_manual_recovery() -> None:
    """The VMI stopped while the VM recorded a pending migration: ManualRecoveryRequired,
    and the VM is not started; once the template names the source claim again, both go."""
    pending = {"volumeMigrationState": {"migratedVolumes": _migrated()}}
    plan = _plan(_vm("dst", status={"volumeUpdateState": pending}), None)
    assert plan.block_start
    (verdict,) = plan.verdicts
    assert (verdict.type, verdict.status) == ("ManualRecoveryRequired", ConditionStatus.TRUE)
    assert "data (dst)" in verdict.message
    reverted = _plan(_vm("src", status={"volumeUpdateState": pending}), None)
    assert reverted == VolumeMigrationPlan()


def test_starting_writes_the_vmi_status_with_a_guard() -> None:
    """The status patch tests the conditions it read, then sets VolumesChange=True and
    migratedVolumes (KubeVirt's shapes)."""
    vmi = _vmi("src", conditions=("LiveMigratable",))
    plan = _plan(_vm("dst"), vmi)
    ops = _status_ops(vmi, plan, now=NOW)
    assert ops[0]["op"] == "test" and ops[0]["path"] == "/status/conditions"
    conditions = ops[1]["value"]
    change = next(c for c in conditions if c["type"] == "VolumesChange")
    assert (change["status"], change["reason"]) == ("True", "VolumeMigrationInProgress")
    assert ops[2]["path"] == "/status/migratedVolumes"
    assert ops[2]["value"][0]["sourcePVCInfo"]["claimName"] == "src"
    assert ops[2]["value"][0]["destinationPVCInfo"]["claimName"] == "dst"


def test_reverting_the_template_cancels_the_volume_migration() -> None:
    """While VolumesChange=True the template names the source claim again (KubeVirt's
    cancellation): the VMI's volume goes back to it, the VMIM under way is deleted (the
    migration aborts, the guest stays on the source disk), VolumesChange=False with
    reason VolumesChangeCancellation, the VM's volumeUpdateState is cleared."""
    vmi = _vmi("dst", conditions=("VolumesChange", "LiveMigratable"), migratedVolumes=_migrated())
    running = _migration("m1", phase="Running", created="2026-11-29T11:59:00Z")
    plan = _plan(_vm("src"), vmi, (running,))
    assert (plan.cancelled, plan.volumes_change, plan.abort, plan.state) == (
        True, False, ("m1",), None,
    )  # fmt: skip
    assert plan.volumes is not None
    assert plan.volumes[1] == {"name": "data", "persistentVolumeClaim": {"claimName": "src"}}
    ops = _status_ops(vmi, plan, now=NOW)
    change = next(c for c in ops[1]["value"] if c["type"] == "VolumesChange")
    assert (change["status"], change["reason"]) == ("False", "VolumesChangeCancellation")


def test_an_earlier_volume_migration_does_not_finish_a_new_one() -> None:
    """The VMI's migrationState still names the completed VMIM of an earlier volume change
    (created before the current VolumesChange): the new change is not taken as done."""
    state = {"migrationUid": "old", "completed": True}
    vmi = _vmi("dst", conditions=("VolumesChange", "LiveMigratable"),
               migratedVolumes=_migrated(), migrationState=state)  # fmt: skip
    earlier = (_migration("old", phase="Succeeded", created="2026-11-29T10:00:00Z"),)
    plan = _plan(_vm("dst"), vmi, earlier)
    assert plan.volumes_change is None and plan.create_migration


def test_no_migration_before_the_vmi_names_the_destination() -> None:
    """VolumesChange=True but the VMI's volume still names the source (its spec write did
    not land): the spec is written again, and no VMIM is made — its target pod would mount
    the source claim."""
    vmi = _vmi("src", conditions=("VolumesChange", "LiveMigratable"), migratedVolumes=_migrated())
    plan = _plan(_vm("dst"), vmi)
    assert not plan.create_migration
    assert plan.volumes is not None
    assert plan.volumes[1] == {"name": "data", "persistentVolumeClaim": {"claimName": "dst"}}


def test_any_migration_since_the_change_completes_it() -> None:
    """A migration the VM controller did not make (an evacuation during the pending change)
    carried the copy too (the handler passes migratedVolumes to it): its completion ends
    the volume change rather than a second copy starting from the destination."""
    state = {"migrationUid": "evac", "completed": True}
    vmi = _vmi("dst", conditions=("VolumesChange", "LiveMigratable"),
               migratedVolumes=_migrated(), migrationState=state)  # fmt: skip
    evacuation = _migration("evac", phase="Succeeded", created="2026-11-29T11:30:00Z")
    plain = VirtualMachineInstanceMigration.from_dict(
        {
            **evacuation.to_dict(),
            "metadata": {**evacuation.to_dict()["metadata"], "annotations": {}},
        }
    )
    plan = _plan(_vm("dst"), vmi, (plain,))
    assert (plan.volumes_change, plan.create_migration) == (False, False)
