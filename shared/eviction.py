"""Eviction strategies (KubeVirt's `spec.evictionStrategy` and the cluster-wide default):
what an eviction of a launcher pod does, whether a VMI's launcher pods get a
PodDisruptionBudget, and when the evacuation part of the migration controller moves a VMI.
Pure functions; the webhook (virt_api/admission/eviction.py), the disruption-budget
controller and the evacuation controller act on their answers.

    strategy               migratable        eviction of its launcher pod     budget
    None                   either            allowed (the VMI stops)           none
    LiveMigrate            yes               marked for evacuation, 429        yes
    LiveMigrate            no                refused, 429, says why            yes
    LiveMigrateIfPossible  yes               marked for evacuation, 429        yes
    LiveMigrateIfPossible  no                allowed (the VMI stops)           none
    External               either            marked only, 429 (someone else    yes
                                             moves it; no VMIM is created)

"Migratable" is the LiveMigratable condition the handler decides (handler/status.py),
read here and nowhere else recomputed. A marked VMI carries `status.evacuationNodeName`;
the evacuation controller creates a VMIM for it (strategies that migrate) and clears the
mark once the VMI runs elsewhere. 429 is what `kubectl drain` retries on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from shared.model import EvictionStrategy, VirtualMachineInstance, VMIConditionType

S = EvictionStrategy
# The message format the descheduler recognises as "eviction in the background".
EVACUATION_MESSAGE = 'Eviction triggered evacuation of VMI "{key}"'


class EvictionAction(enum.StrEnum):
    """What the eviction webhook answers for one launcher pod."""

    ALLOW = "Allow"  # the pod may go (the VMI stops with it)
    EVACUATE = "Evacuate"  # mark the VMI for evacuation, refuse with 429
    REFUSE = "Refuse"  # refuse with 429, mark nothing


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionVerdict:
    """The webhook's answer and the message `kubectl drain` prints."""

    action: EvictionAction
    message: str = ""


def effective_strategy(vmi: VirtualMachineInstance, default: EvictionStrategy) -> EvictionStrategy:
    """The VMI's own strategy, else the cluster-wide default."""
    return vmi.spec.eviction_strategy or default


def is_migratable(vmi: VirtualMachineInstance) -> bool:
    """The handler's LiveMigratable condition is True."""
    return vmi.status.condition_is_true(VMIConditionType.LIVE_MIGRATABLE)


def _not_migratable_why(vmi: VirtualMachineInstance) -> str:
    cond = vmi.status.condition(VMIConditionType.LIVE_MIGRATABLE)
    if cond is None:
        return "its LiveMigratable condition is not known yet"
    return cond.message or cond.reason or "LiveMigratable is False"


def protects(vmi: VirtualMachineInstance, default: EvictionStrategy) -> bool:
    """Whether evictions of this VMI's launcher pods must be held back (budget and webhook)."""
    strategy = effective_strategy(vmi, default)
    if strategy is S.LIVE_MIGRATE_IF_POSSIBLE:
        return is_migratable(vmi)
    return strategy in (S.LIVE_MIGRATE, S.EXTERNAL)


def migrates_on_eviction(vmi: VirtualMachineInstance, default: EvictionStrategy) -> bool:
    """Whether a VMI marked for evacuation is live-migrated by kubevirt-py (not External)."""
    strategy = effective_strategy(vmi, default)
    return strategy in (S.LIVE_MIGRATE, S.LIVE_MIGRATE_IF_POSSIBLE) and is_migratable(vmi)


def _migrating_into(vmi: VirtualMachineInstance, pod_migration_uid: str | None) -> bool:
    """The pod is the target of the VMI's migration in progress."""
    state = vmi.status.migration_state
    return (
        pod_migration_uid is not None
        and state is not None
        and state.migration_uid == pod_migration_uid
        and not (state.completed or state.failed)
    )


_ALLOW = EvictionVerdict(action=EvictionAction.ALLOW)


def eviction_verdict(
    vmi: VirtualMachineInstance,
    *,
    pod_node: str | None,
    default: EvictionStrategy,
    pod_migration_uid: str | None = None,
) -> EvictionVerdict:
    """What an eviction of the VMI's launcher pod on `pod_node` does (the table above);
    `pod_migration_uid` is the VMIM the pod was created for (a migration target)."""
    if vmi.is_final() or vmi.metadata.is_deleting:
        return _ALLOW
    if vmi.status.node_name == pod_node:
        return _verdict_where_it_runs(vmi, default)
    if _migrating_into(vmi, pod_migration_uid):
        message = f"the pod is the target of VMI {vmi.key}'s migration in progress"
        return EvictionVerdict(action=EvictionAction.REFUSE, message=message)
    return _ALLOW  # a pod on a node the VMI has left


def _verdict_where_it_runs(
    vmi: VirtualMachineInstance, default: EvictionStrategy
) -> EvictionVerdict:
    strategy = effective_strategy(vmi, default)
    if strategy is S.LIVE_MIGRATE and not is_migratable(vmi):
        why = _not_migratable_why(vmi)
        message = (
            f"VMI {vmi.key} has evictionStrategy LiveMigrate but is not live-migratable "
            f"({why}): its launcher pod cannot be evicted; stop the VM or change its "
            "evictionStrategy"
        )
        return EvictionVerdict(action=EvictionAction.REFUSE, message=message)
    if not protects(vmi, default):
        return _ALLOW
    evacuation = EVACUATION_MESSAGE.format(key=vmi.key)
    if vmi.status.evacuation_node_name:
        return EvictionVerdict(
            action=EvictionAction.REFUSE, message=f"Evacuation in progress: {evacuation}"
        )
    return EvictionVerdict(action=EvictionAction.EVACUATE, message=evacuation)


def budget_min_available(
    vmi: VirtualMachineInstance, *, live_pods: int, default: EvictionStrategy
) -> int | None:
    """minAvailable of the VMI's PodDisruptionBudget, None when it needs none: 1, or 2 while
    a migration runs (its source and target pods both live)."""
    if vmi.is_final() or vmi.metadata.is_deleting or not protects(vmi, default):
        return None
    return 2 if live_pods >= 2 else 1
