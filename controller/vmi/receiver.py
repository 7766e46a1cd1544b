"""The two VMIs of a decentralized migration, as the VMI controller sees them
(docs/migration.md, controller/migration/decentral.py).

- The receiving VMI (created by a WaitAsReceiver VM, marked RECEIVER_ANNOTATION) waits in
  phase WaitingForSync with no launcher pod of its own: the receiving VMIM's target pod is
  its pod (activePods). Once the target handler took the guest over (it writes nodeName),
  the VMI is Running there with its node label, and that node's handler reconciles it as
  after any migration. A failed migration (the receiving VMIM writes it to the VMI's
  migrationState, failed and completed) leaves it WaitingForSync, as KubeVirt's: a new
  pair of VMIMs may move the guest to it.
- The sending VMI whose guest went to the other VMI (migrationState completed, its
  targetState naming another VMI) ends Succeeded: its launcher pods are torn down as for
  any final VMI; the guest lives on in the receiving VMI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from controller.transitions import with_phases
from controller.vmi.plan import VMIPlan
from shared.labels import NODE_NAME_LABEL, RECEIVER_ANNOTATION
from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance, VMIPhase

HANDED_OFF = frozenset({VMIPhase.SCHEDULED, VMIPhase.RUNNING})
WAITING = frozenset({VMIPhase.UNSET, VMIPhase.PENDING, VMIPhase.WAITING_FOR_SYNC})


def is_waiting_receiver(vmi: VirtualMachineInstance) -> bool:
    """A receiving VMI whose guest has not arrived yet."""
    marked = vmi.metadata.annotations.get(RECEIVER_ANNOTATION) == "true"
    return marked and vmi.status.phase_or_unset in WAITING


def migrated_away(vmi: VirtualMachineInstance) -> bool:
    """The guest of this (sending) VMI now runs in another VMI."""
    state = vmi.status.migration_state
    return bool(state is not None and state.completed and state.leaves_vmi(vmi.namespace, vmi.name))


def plan_decentral(
    vmi: VirtualMachineInstance, pods: Sequence[LauncherPod], *, now: datetime
) -> VMIPlan | None:
    """The plan for either VMI of a decentralized migration (None: the usual plan)."""
    if is_waiting_receiver(vmi):
        return plan_receiver(vmi, pods, now=now)
    if vmi.status.phase_or_unset in HANDED_OFF and migrated_away(vmi):
        return plan_migrated_away(vmi, now=now)
    return None


def plan_receiver(
    vmi: VirtualMachineInstance, pods: Sequence[LauncherPod], *, now: datetime
) -> VMIPlan:
    """WaitingForSync, activePods the target pod; Running once the guest was taken over;
    still WaitingForSync when its migration failed (KubeVirt's: the receiving VMIM wrote
    it to its migrationState; the guest never came, so no nodeName)."""
    status = with_phases(vmi.status, [VMIPhase.WAITING_FOR_SYNC], now)
    active = {p.uid: p.node_name for p in pods if p.node_name and not p.terminal}
    if dict(status.active_pods) != active:
        status = dataclasses.replace(status, active_pods=active)
    node = status.node_name
    if not node:
        return VMIPlan(status=status, finalizer=True)
    status = with_phases(status, [VMIPhase.RUNNING], now)
    return VMIPlan(status=status, labels={NODE_NAME_LABEL: node}, finalizer=True)


def plan_migrated_away(vmi: VirtualMachineInstance, *, now: datetime) -> VMIPlan:
    """The sending VMI ends Succeeded (its pods go with the next sync's teardown)."""
    status = with_phases(vmi.status, [VMIPhase.SUCCEEDED], now)
    return VMIPlan(status=status, finalizer=True)
