"""Volume migration, the VM controller's I/O: reads the caches for controller/vm/volmig.py,
writes what it plans (the VMI's status then spec, the VMIM) and folds its verdicts and
volumeUpdateState into the VM's status."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import datetime
from typing import Any

import structlog

from controller.errors import SyncError
from controller.informers import VMI_KEY_INDEX, Informers
from controller.services.volumes.claims import Claim
from controller.transitions import vm_condition, vmi_condition
from controller.vm.volmig import (
    CANCELLED,
    IN_PROGRESS,
    VolumeMigrationInputs,
    VolumeMigrationPlan,
    plan_volume_migration,
)
from shared.kube import (
    VMIMS,
    VMIS,
    ApiError,
    Conflict,
    Invalid,
    KubeClient,
    NotFound,
    PatchType,
    TransportError,
)
from shared.model import (
    API_VERSION,
    ConditionReason,
    ConditionStatus,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMStatus,
)
from shared.model.volmig import VOLUME_UPDATE_MIGRATION

log = structlog.get_logger("controller.vm.volmig")


def plan(
    inf: Informers, vm: VirtualMachine, vmi: VirtualMachineInstance | None, *, now: datetime
) -> VolumeMigrationPlan:
    """The plan from the informers' caches."""
    claims = inf.claims.store

    def claim_of(name: str) -> Claim | None:
        return claims.get(f"{vm.namespace}/{name}")

    migrations = inf.migrations.store.by_index(VMI_KEY_INDEX, vm.key) if vmi is not None else []
    return plan_volume_migration(
        VolumeMigrationInputs(vm=vm, vmi=vmi, claim_of=claim_of, migrations=migrations, now=now)
    )


async def apply(
    client: KubeClient, vmi: VirtualMachineInstance | None, p: VolumeMigrationPlan, *, now: datetime
) -> None:
    """The VMI's status, then its spec (the target pod mounts the destination), then the
    VMIM. A VMI changed meanwhile is left to the next sync (its update event comes)."""
    if vmi is None:
        return
    try:
        for name in p.abort:
            with contextlib.suppress(NotFound):
                await client.delete(VMIMS, name, namespace=vmi.namespace)
            log.info("volume_migration_cancelled", migration=name)
        if p.volumes_change is not None:
            await _patch(client, vmi, _status_ops(vmi, p, now=now), subresource="status")
        if p.volumes is not None:
            raw = vmi.to_dict().get("spec", {}).get("volumes", [])
            ops = [{"op": "test", "path": "/spec/volumes", "value": raw},
                   {"op": "replace", "path": "/spec/volumes", "value": p.volumes}]  # fmt: skip
            await _patch(client, vmi, ops, subresource=None)
            log.info("volume_migration_started",
                     volumes=[v.volume_name for v in p.migrated or ()])  # fmt: skip
        if p.create_migration:
            await _create_migration(client, vmi)
    except (Invalid, Conflict) as e:
        log.info("volume_migration_retry", error=str(e))
    except NotFound:
        return
    except (ApiError, TransportError) as e:
        raise SyncError(ConditionReason.FAILED_UPDATE, f"VMI {vmi.key}: {e}") from e


def _status_ops(
    vmi: VirtualMachineInstance, p: VolumeMigrationPlan, *, now: datetime
) -> list[dict[str, Any]]:
    raw = vmi.to_dict().get("status", {})
    kind = VMIConditionType.VOLUMES_CHANGE
    if p.volumes_change:
        names = ", ".join(v.volume_name or "" for v in p.migrated or ())
        status = vmi_condition(vmi.status, kind, ConditionStatus.TRUE, reason=IN_PROGRESS,
                               message=f"migrating volumes {names}", now=now)  # fmt: skip
    elif p.cancelled:
        status = vmi_condition(vmi.status, kind, ConditionStatus.FALSE, reason=CANCELLED,
                               message="the volume change was cancelled", now=now)  # fmt: skip
    else:
        kept = tuple(c for c in vmi.status.conditions if c.type != kind)
        status = dataclasses.replace(vmi.status, conditions=kept)
    conditions = [c.to_dict() for c in status.conditions]
    ops: list[dict[str, Any]] = []
    if "conditions" in raw:
        ops.append({"op": "test", "path": "/status/conditions", "value": raw["conditions"]})
    ops.append({"op": "add", "path": "/status/conditions", "value": conditions})
    if p.migrated is not None:
        value = [v.to_dict() for v in p.migrated]
        ops.append({"op": "add", "path": "/status/migratedVolumes", "value": value})
    return ops


async def _patch(
    client: KubeClient,
    vmi: VirtualMachineInstance,
    ops: list[dict[str, Any]],
    *,
    subresource: str | None,
) -> None:
    await client.patch(VMIS, vmi.name, ops, namespace=vmi.namespace,
                            patch_type=PatchType.JSON, subresource=subresource)  # fmt: skip


async def _create_migration(client: KubeClient, vmi: VirtualMachineInstance) -> None:
    body = {
        "apiVersion": API_VERSION,
        "kind": VirtualMachineInstanceMigration.KIND,
        "metadata": {
            "generateName": "kubevirt-volume-migration-",
            "namespace": vmi.namespace,
            "annotations": {VOLUME_UPDATE_MIGRATION: vmi.name},
        },
        "spec": {"vmiName": vmi.name},
    }
    created = await client.create(VMIMS, body, namespace=vmi.namespace)
    log.info("volume_migration_created", migration=(created.get("metadata") or {}).get("name"))


def with_verdicts(
    status: VMStatus, vm: VirtualMachine, p: VolumeMigrationPlan, *, now: datetime
) -> VMStatus:
    """`status` (its conditions rendered from the VMI this sync) with the plan's VM
    conditions and its volumeUpdateState."""
    types = {v.type for v in p.verdicts}
    kept = [c for c in status.conditions if c.type not in types]
    for v in p.verdicts:
        # A RestartRequired for other fields (liveupdate.py) keeps its message too.
        other = status.condition(v.type)
        same = other is not None and other.status == v.status and other.message
        message = f"{other.message}; {v.message}" if same and other else v.message
        kept.append(vm_condition(vm.status.condition(v.type), v.type, v.status,
                                 reason=v.reason, message=message, now=now))  # fmt: skip
    return dataclasses.replace(status, conditions=tuple(kept), volume_update_state=p.state)
