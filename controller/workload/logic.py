"""Which running VMIs run an outdated launcher, and which of them to migrate now (pure).

A VMI is outdated when the image of its active launcher pod (the one on its node, not a
migration target) differs from the launcher image the controller creates pods with now
(after an upgrade of the manifests). Outdated VMIs that are LiveMigratable and not already
migrating are migrated, at most `batch` at a time (KubeVirt's batchEvictionSize; the
migration controller's parallel limits apply on top); the others are left running, labelled
`kubevirt.io/outdatedLauncherImage` and counted in kubevirt_vmi_number_of_outdated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance, VirtualMachineInstanceMigration, VMIPhase
from shared.model.enums import VMIConditionType

OUTDATED_LABEL = "kubevirt.io/outdatedLauncherImage"
WORKLOAD_UPDATE_ANNOTATION = "kubevirt.io/workloadUpdateMigration"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadPlan:
    """Outdated VMIs (keys), the ones to migrate now, and the ones that cannot move."""

    outdated: frozenset[str] = frozenset()
    migrate: tuple[VirtualMachineInstance, ...] = ()
    stuck: tuple[str, ...] = ()  # outdated and not LiveMigratable


def active_image(vmi: VirtualMachineInstance, pods: Sequence[LauncherPod]) -> str | None:
    """The launcher image of the pod the VMI runs in now."""
    for pod in pods:
        if pod.node_name == vmi.status.node_name and not pod.migration_uid and not pod.terminal:
            return pod.image
    return None


def plan_updates(
    vmis: Sequence[VirtualMachineInstance],
    pods_of: Mapping[str, Sequence[LauncherPod]],
    migrations: Sequence[VirtualMachineInstanceMigration],
    *,
    image: str,
    batch: int,
    pending: frozenset[str] = frozenset(),
) -> WorkloadPlan:
    """The plan for every VMI (`pods_of`: launcher pods by VMI uid; `pending`: VMIs whose
    update migration was just created, not yet seen by the informer)."""
    moving = {m.vmi_key for m in migrations if not m.is_final()} | pending
    updating = sum(
        1
        for m in migrations
        if not m.is_final() and WORKLOAD_UPDATE_ANNOTATION in m.metadata.annotations
    )
    outdated: set[str] = set()
    ready: list[VirtualMachineInstance] = []
    stuck: list[str] = []
    for vmi in vmis:
        if vmi.status.phase != VMIPhase.RUNNING or vmi.metadata.is_deleting:
            continue
        current = active_image(vmi, pods_of.get(vmi.uid, ()))
        if current is None or current == image:
            continue
        outdated.add(vmi.key)
        if not vmi.status.condition_is_true(VMIConditionType.LIVE_MIGRATABLE):
            stuck.append(vmi.key)
        elif vmi.key not in moving:
            ready.append(vmi)
    room = max(0, batch - updating - len(pending))
    ready.sort(key=lambda v: v.key)
    return WorkloadPlan(
        outdated=frozenset(outdated), migrate=tuple(ready[:room]), stuck=tuple(stuck)
    )
