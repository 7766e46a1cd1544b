"""Which running VMIs need a migration for their multus networks (pure): KubeVirt ≥ 1.4's
migration-based NIC hotplug, unplug and NAD swap (no dynamic-networks controller).

A VMI's launcher pod asks multus for its networks once, at creation (its
`k8s.v1.cni.cncf.io/networks` annotation, shared/multus.py). When the VMI's spec wants
other attachments — a NIC hot-plugged, one unplugged, a network pointed at another NAD
(controller/vm/nichotplug.py) — the pod it runs in no longer matches: a live migration
moves it to a pod made from the current spec. An unplugged NIC is first detached from the
domain in place (virt-handler; it leaves status.interfaces): only then does the VMI move,
so the target pod never lacks a NIC the guest still has.

    pod annotation ≠ the VMI's, no absent NIC left in status.interfaces,
    LiveMigratable, Running, no migration of it under way  → migrate
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared import multus, netbinding, nics
from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance, VMIPhase
from shared.model.enums import VMIConditionType

NETWORK_UPDATE_ANNOTATION = "kubevirt.io/network-update-migration"


def current_pod(vmi: VirtualMachineInstance, pods: Sequence[LauncherPod]) -> LauncherPod | None:
    """The launcher pod the VMI runs in now: on its node and not going (a former migration
    target included)."""
    for pod in pods:
        if pod.node_name == vmi.status.node_name and not pod.gone_or_going:
            return pod
    return None


def _unplug_pending(vmi: VirtualMachineInstance) -> bool:
    """An interface marked absent is still in status.interfaces (the domain has it)."""
    gone = {i.name for i in vmi.spec.domain.devices.interfaces if nics.is_absent(i)}
    return any(s.name in gone for s in vmi.status.interfaces if s.info_source != "guest-agent")


def needs_network_migration(vmi: VirtualMachineInstance, pod: LauncherPod | None) -> bool:
    """The VMI's pod has other multus attachments than its spec wants (and may move now)."""
    if pod is None or vmi.status.phase != VMIPhase.RUNNING or vmi.metadata.is_deleting:
        return False
    if netbinding.own_networks(pod.networks) == multus.networks_annotation(vmi):
        return False
    return not _unplug_pending(vmi)


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPlan:
    """VMIs to migrate now; keys of those that need it but are not LiveMigratable; whether
    any VMI needs one at all (the updater looks again while one does: one moving now may
    need another once it landed)."""

    ready: tuple[VirtualMachineInstance, ...] = ()
    stuck: tuple[str, ...] = ()
    needed: bool = False


def plan_network_migrations(
    vmis: Sequence[VirtualMachineInstance],
    pods_of: Mapping[str, Sequence[LauncherPod]],
    *,
    moving: frozenset[str],
) -> NetworkPlan:
    """The plan; `moving`: keys of VMIs with a migration under way or just asked for."""
    ready, stuck, needed = [], [], False
    for vmi in vmis:
        if not needs_network_migration(vmi, current_pod(vmi, pods_of.get(vmi.uid, ()))):
            continue
        needed = True
        if not vmi.status.condition_is_true(VMIConditionType.LIVE_MIGRATABLE):
            stuck.append(vmi.key)
        elif vmi.key not in moving:
            ready.append(vmi)
    ready.sort(key=lambda v: v.key)
    return NetworkPlan(ready=tuple(ready), stuck=tuple(sorted(stuck)), needed=needed)
