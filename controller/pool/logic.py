"""VirtualMachinePool decisions, pure: which indexes to create, which VMs to delete, which
to update to the current template, and the status (KubeVirt's pool controller).

    names     each VM is `<pool>-<index>`; scale-up takes the lowest free indexes;
    per VM    dataVolumeTemplates are named `<name>-<index>` (and the dataVolume and
              persistentVolumeClaim volumes naming them: each VM its own claim),
              and with nameGeneration the secret / configMap references get `-<index>` too;
    scale-in  proactive (default): the surplus is deleted in the sort policy's order
              (KubeVirt's default Random; AscendingOrder, DescendingOrder, Newest,
              Oldest), among the VMs its selectors allow; opportunistic / unmanaged:
              nothing is deleted by the pool; statePreservation Offline keeps the
              DataVolumes of the VMs removed (controller/pool/preserve.py);
    update    a VM whose revision label differs from the template's hash is updated
              (among the VMs the strategy's selectors allow): proactive (default)
              rewrites the VM and restarts its VMI, in its sort order, within
              maxUnavailable; opportunistic rewrites the VM only (its next VMI has the
              new spec), unmanaged leaves it;
    healing   with autohealing, a VM whose start failed `startUpFailureThreshold` times
              in a row, or failing to start for minFailingToStartDuration, is deleted
              and made again (controller/pool/policies.py).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.pool import policies, preserve
from controller.replicaset.logic import ScaleError, scale_conditions
from shared.model import API_VERSION, VirtualMachine, VirtualMachineInstance, parse_time
from shared.model._codec import copy_json
from shared.model.enums import VMIConditionType
from shared.model.pool import (
    POOL_API_VERSION,
    Autohealing,
    PoolSelectors,
    PoolStatus,
    SortPolicy,
    Strategy,
    VirtualMachinePool,
)
from shared.naming import SUBDOMAIN, fit, label_value

POOL_LABEL = "kubevirt.io/vmpool"  # KubeVirt's label on a pool's VMs
REVISION_LABEL = "pool.kubevirt.io/revision"  # kubevirt-py's: the template's hash

Pool = VirtualMachinePool
VM = VirtualMachine
VMI = VirtualMachineInstance
Shuffle = Callable[[list[VM]], None]


class InvalidPool(ValueError):
    """The pool cannot be synced as it is (admission refuses this; old objects may not)."""


def check_pool(pool: Pool) -> None:
    """Raise InvalidPool unless the selector selects the template's labels."""
    spec = pool.spec
    template = spec.virtual_machine_template
    if spec.selector is None or template is None:
        raise InvalidPool("spec.selector and spec.virtualMachineTemplate are required")
    if not spec.selector.matches(template.metadata.labels):
        raise InvalidPool("spec.selector does not match the template's labels")


def index_of(pool: Pool, vm: VM) -> int | None:
    """The index in `<pool>-<index>` (member_name's), if the VM is named so."""
    _, _, tail = vm.name.rpartition("-")
    if not tail.isdigit() or member_name(pool, int(tail)) != vm.name:
        return None
    return int(tail)


def member_name(pool: Pool, index: int) -> str:
    """KubeVirt's `<pool>-<index>`, cut with a hash to a VM name's 63 characters."""
    return fit(pool.name, suffix=str(index))


def template_hash(pool: Pool) -> str:
    """A short hash of the VM template (the revision a VM was made from)."""
    template = pool.spec.virtual_machine_template
    raw = json.dumps(template.to_dict() if template else {}, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def _suffix_volumes(volumes: list[dict[str, Any]], rename: Callable[[str, str], str]) -> None:
    for vol in volumes:
        for kind, (refs, fields) in _REFS.items():
            source = vol.get(kind)
            if not isinstance(source, dict):
                continue
            for key in refs:
                ref = source.get(key)
                if isinstance(ref, dict) and isinstance(ref.get("name"), str):
                    ref["name"] = rename(kind, ref["name"])
            for key in fields:
                if isinstance(source.get(key), str):
                    source[key] = rename(kind, source[key])


# Volume sources and where they name another object: (references {name: …}, string fields).
_REFS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dataVolume": ((), ("name",)),
    "persistentVolumeClaim": ((), ("claimName",)),
    "configMap": ((), ("name",)),
    "secret": ((), ("secretName",)),
    "cloudInitNoCloud": (("secretRef", "networkDataSecretRef"), ()),
    "cloudInitConfigDrive": (("secretRef", "networkDataSecretRef"), ()),
}


def vm_spec(pool: Pool, index: int) -> dict[str, Any]:
    """The template's VM spec for index `index`: per-VM DataVolumes, and per-VM secrets and
    configMaps when nameGeneration asks."""
    template = pool.spec.virtual_machine_template
    if template is None:
        raise InvalidPool("spec.virtualMachineTemplate is missing")
    spec: dict[str, Any] = copy_json(template.spec.to_dict())
    dvs = [d for d in spec.get("dataVolumeTemplates") or [] if isinstance(d, dict)]
    dv_names = {str((d.get("metadata") or {}).get("name")) for d in dvs}
    for dv in dvs:
        meta = dv.setdefault("metadata", {})
        meta["name"] = fit(str(meta.get("name")), suffix=str(index))
    gen = pool.spec.name_generation
    secrets = bool(gen and gen.append_index_to_secret_refs)
    config_maps = bool(gen and gen.append_index_to_config_map_refs)

    def rename(kind: str, name: str) -> str:
        wanted = (
            (kind in ("dataVolume", "persistentVolumeClaim") and name in dv_names)
            or (kind == "configMap" and config_maps)
            or (kind in ("secret", "cloudInitNoCloud", "cloudInitConfigDrive") and secrets)
        )
        if not wanted:
            return name
        if kind in ("dataVolume", "persistentVolumeClaim"):
            return fit(name, suffix=str(index))
        return fit(name, suffix=str(index), limit=SUBDOMAIN)

    vmi_spec = (spec.get("template") or {}).get("spec") or {}
    _suffix_volumes([v for v in vmi_spec.get("volumes") or [] if isinstance(v, dict)], rename)
    return spec


def vm_body(pool: Pool, index: int) -> dict[str, Any]:
    """VM `<pool>-<index>`: the template's metadata and spec, labelled and owned by the
    pool (and held by its finalizer with opportunistic Offline: controller/pool/preserve.py)."""
    template = pool.spec.virtual_machine_template
    if template is None:
        raise InvalidPool("spec.virtualMachineTemplate is missing")
    meta = template.metadata
    labels = {
        **meta.labels,
        POOL_LABEL: label_value(pool.name),
        REVISION_LABEL: template_hash(pool),
    }
    return {
        "apiVersion": API_VERSION,
        "kind": VM.KIND,
        "metadata": {
            "name": member_name(pool, index),
            "namespace": pool.namespace,
            "labels": labels,
            "annotations": dict(meta.annotations),
            "ownerReferences": [pool.controller_reference(api_version=POOL_API_VERSION).to_dict()],
            **({"finalizers": [preserve.POOL_FINALIZER]} if preserve.holding(pool) else {}),
        },
        "spec": vm_spec(pool, index),
    }


def owned(pool: Pool, vms: Iterable[VM]) -> list[VM]:
    """The pool's VMs (controller reference by UID), deleting ones included."""
    out = []
    for vm in vms:
        ref = vm.metadata.controller_ref()
        if ref is not None and ref.uid == pool.uid and ref.kind == Pool.KIND:
            out.append(vm)
    return out


def scale_in_order(pool: Pool, vms: Sequence[VM], shuffle: Shuffle) -> list[VM]:
    """The VMs in the order the scale-in strategy deletes them."""
    strategy = pool.spec.scale_in_strategy
    policy = strategy.sort_policy if strategy is not None else SortPolicy.RANDOM
    return sort_vms(pool, vms, policy=policy, shuffle=shuffle)


def sort_vms(pool: Pool, vms: Sequence[VM], *, policy: SortPolicy, shuffle: Shuffle) -> list[VM]:
    """The VMs in a sort policy's order."""

    def index(vm: VM) -> int:
        return index_of(pool, vm) or 0

    def created(vm: VM) -> float:
        stamp = vm.metadata.creation_timestamp
        return parse_time(stamp).timestamp() if stamp else 0.0

    match policy:
        case SortPolicy.ASCENDING:
            return sorted(vms, key=index)
        case SortPolicy.DESCENDING:
            return sorted(vms, key=index, reverse=True)
        case SortPolicy.NEWEST:
            return sorted(vms, key=created, reverse=True)
        case SortPolicy.OLDEST:
            return sorted(vms, key=created)
    mixed = list(vms)
    shuffle(mixed)
    return mixed


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolPlan:
    """What one sync does."""

    create: tuple[int, ...] = ()
    delete: tuple[VM, ...] = ()
    update: tuple[VM, ...] = ()  # outdated VMs to rewrite
    restart: bool = False  # proactive update: their VMIs are restarted too


@dataclass(frozen=True, slots=True, kw_only=True)
class World:
    """What a pool's sync sees beside its VMs: their VMIs (by VM name) and the time."""

    vmis: Mapping[str, VMI]
    now: datetime


def plan_pool(
    pool: Pool, vms: Sequence[VM], *, world: World, shuffle: Shuffle = random.shuffle
) -> PoolPlan:
    """Create, delete and update toward spec.replicas and the current template."""
    if pool.spec.paused or pool.metadata.is_deleting:
        return PoolPlan()
    live = [vm for vm in vms if not vm.metadata.is_deleting]
    heal = pool.spec.autohealing
    broken = [vm for vm in live if heal is not None and _failing(vm, heal, now=world.now)]
    live = [vm for vm in live if vm not in broken]
    surplus = len(live) - pool.spec.wanted
    strategy = pool.spec.scale_in_strategy
    managed_in = strategy is None or strategy.proactive is not None
    doomed: list[VM] = []
    if surplus > 0 and managed_in:
        selectors = _selectors(strategy)
        doomed = policies.selected(scale_in_order(pool, live, shuffle), selectors)[:surplus]
    taken = {i for vm in vms if (i := index_of(pool, vm)) is not None}
    free = (i for i in range(len(taken) + pool.spec.wanted + 1) if i not in taken)
    create = tuple(next(free) for _ in range(max(0, -surplus)))
    keep = [vm for vm in live if vm not in doomed]
    update = pool.spec.update_strategy
    restart = update is None or update.opportunistic is None
    outdated = _to_update(pool, keep, world=world, restart=restart, shuffle=shuffle)
    return PoolPlan(create=create, delete=(*broken, *doomed), update=outdated, restart=restart)


def _selectors(strategy: Strategy | None) -> PoolSelectors | None:
    chosen = strategy.proactive.selection_policy if strategy and strategy.proactive else None
    return chosen.selectors if chosen is not None else None


def _to_update(
    pool: Pool, keep: Sequence[VM], *, world: World, restart: bool, shuffle: Shuffle
) -> tuple[VM, ...]:
    """The outdated VMs the update strategy updates now: those its selectors allow, in its
    sort order; a proactive update (a restart) restarts VMs already unavailable, then at
    most maxUnavailable minus the unavailable ones."""
    update = pool.spec.update_strategy
    if update is not None and update.unmanaged is not None:
        return ()
    revision = template_hash(pool)
    outdated = [vm for vm in keep if vm.metadata.labels.get(REVISION_LABEL) != revision]
    outdated = policies.selected(outdated, _selectors(update))
    if not restart:
        return tuple(outdated)
    policy = update.sort_policy if update is not None else SortPolicy.RANDOM
    ordered = sort_vms(pool, outdated, policy=policy, shuffle=shuffle)
    down = {vm.name for vm in keep if not available(vm, world.vmis.get(vm.name))}
    budget = max(0, policies.max_unavailable(pool.spec) - len(down))
    up = [vm for vm in ordered if vm.name not in down]
    return (*(vm for vm in ordered if vm.name in down), *up[:budget])


def available(vm: VM, vmi: VMI | None) -> bool:
    """A VM counted available by maxUnavailable: Ready, its VMI there, not being deleted,
    and Ready (KubeVirt's rule)."""
    return (
        bool(vm.status.ready)
        and vmi is not None
        and not vmi.metadata.is_deleting
        and vmi.status.condition_is_true(VMIConditionType.READY)
    )


def _failing(vm: VM, heal: Autohealing, *, now: datetime) -> bool:
    failure = vm.status.start_failure
    if failure and (failure.consecutive_fail_count or 0) >= heal.threshold:
        return True
    return policies.failing_too_long(vm, heal, now=now)


def updated_vm(pool: Pool, vm: VM) -> dict[str, Any]:
    """The VM rewritten to the current template (its index kept), at its resourceVersion."""
    index = index_of(pool, vm)
    body = vm_body(pool, index if index is not None else 0)
    raw = vm.to_dict()
    raw["spec"] = body["spec"]
    meta = raw.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), **body["metadata"]["labels"]}
    raw.pop("status", None)
    return raw


def pool_status(
    pool: Pool, vms: Sequence[VM], *, error: ScaleError | None, now: datetime
) -> PoolStatus:
    """replicas (VMs not being deleted), readyReplicas (their status.ready), selector,
    ReplicaPaused / ReplicaFailure."""
    live = [vm for vm in vms if not vm.metadata.is_deleting]
    selector = pool.spec.selector
    return PoolStatus(
        replicas=len(live),
        ready_replicas=sum(1 for vm in live if vm.status.ready),
        label_selector=selector.render() if selector is not None else None,
        conditions=scale_conditions(
            pool.status, paused=bool(pool.spec.paused), error=error, now=now
        ),
    )
