"""A standby controller fills no work queue while its informers follow the cluster, and at
election queues every key its caches hold, once, so nothing that changed while it stood
by is missed (docs/soak.md: a standby's queues grew by one key per VMI deleted)."""

from __future__ import annotations

from typing import Any, cast

from controller.drain.budget_logic import budget_name
from controller.reconcile import Reconciler
from shared.kube import (
    PDBS,
    PODS,
    VMIS,
    VMS,
    Counter,
    WatchEvent,
    WatchEventType,
)
from shared.labels import CREATED_BY_LABEL
from tests.unit.controller.builders import pod_dict, vmi_dict
from tests.unit.controller.churn import ControllerRig, WatchedApi, vm_dict
from tests.unit.controller.kubevirt.test_controller import kubevirt
from tests.unit.leakcheck import grown, sizes

POD = "virt-launcher-a-abcde"


def _uid(i: int) -> str:
    return f"5a1d7e00-aaaa-bbbb-cccc-{i:012d}"


def _budget(vmi: str, uid: str) -> dict[str, Any]:
    meta = {
        "name": budget_name(vmi),
        "namespace": "ns",
        "uid": f"pdb-{vmi}",
        "labels": {CREATED_BY_LABEL: uid},
    }
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
            "spec": {"minAvailable": 1}}  # fmt: skip


async def _churn(rig: ControllerRig) -> None:
    """What the cluster does while `rig` stands by: VMIs a, b and gone created (a with a
    launcher pod, gone with a budget a former leader made), a VM made, b and the pod
    changed, gone deleted."""
    api = rig.api
    api.informers[PDBS.plural] = rig.ctl.informers.pdbs
    for i, name in enumerate(("a", "b", "gone")):
        raw = vmi_dict(name)
        raw["metadata"]["uid"] = _uid(i)
        await api.create(VMIS, raw, namespace="ns")
    await api.create(PDBS, _budget("gone", _uid(2)), namespace="ns")
    await api.create(VMS, vm_dict("v1", _uid(9)), namespace="ns")
    await api.create(PODS, pod_dict(POD, uid="pod-a", vmi_uid=_uid(0)), namespace="ns")
    await api.patch(VMIS, "b", {"metadata": {"labels": {"app": "y"}}}, namespace="ns")
    await api.patch(PODS, POD, {"spec": {"nodeName": "node01"}}, namespace="ns")
    await api.delete(VMIS, "gone", namespace="ns")


def _loops(rig: ControllerRig) -> list[Reconciler]:
    return [loop for loop, _ in rig.ctl.loops.workers(rig.ctl.config.workers)]


def _adds(rig: ControllerRig, loop: Reconciler) -> float:
    family = rig.registry.get("kubevirt_workqueue_adds_total")
    assert isinstance(family, Counter)
    return family.labels(loop.queue.name).value


async def _drain(loop: Reconciler) -> list[str]:
    """The keys queued, in order (taken and released without syncing)."""
    keys = []
    while len(loop.queue):
        key = await loop.queue.get()
        assert key is not None
        loop.queue.done(key)
        keys.append(key)
    return keys


async def test_a_standby_queues_nothing_while_its_caches_follow_the_cluster() -> None:
    """Adds, updates and deletes reach the standby's caches, and no queue of any loop holds
    a key, a delayed requeue or a counted add."""
    rig = ControllerRig(standby=True)
    await _churn(rig)
    inf = rig.ctl.informers
    assert sorted(inf.vmis.store) == ["ns/a", "ns/b"]
    assert inf.vms.store.get("ns/v1") is not None
    pod = inf.pods.store.get(f"ns/{POD}")
    assert pod is not None and pod.node_name == "node01"
    for loop in _loops(rig):
        assert (len(loop.queue), loop.queue.pending_delayed()) == (0, 0), loop.queue.name
        assert _adds(rig, loop) == 0, loop.queue.name
    assert not rig.ctl.leading.is_set()


async def _vmi_lived_and_went(rig: ControllerRig, name: str, uid: str) -> None:
    """A VMI as another leader runs it, seen by the standby: created, its pod made and
    running, the VMI running, then pod and VMI deleted."""
    api, pod = rig.api, f"virt-launcher-{name}-abcde"
    raw = vmi_dict(name)
    raw["metadata"]["uid"] = uid
    await api.create(VMIS, raw, namespace="ns")
    await api.create(PODS, pod_dict(pod, uid=f"pod-{uid}", vmi_uid=uid), namespace="ns")
    running = {"spec": {"nodeName": "node01"}, "status": {"phase": "Running"}}
    await api.patch(PODS, pod, running, namespace="ns")
    await api.patch(
        VMIS, name, {"status": {"phase": "Running"}}, namespace="ns", subresource="status"
    )
    await api.delete(PODS, pod, namespace="ns")
    await api.delete(VMIS, name, namespace="ns")


async def test_a_standby_keeps_nothing_per_vmi_gone() -> None:
    """The soak's finding: after a warm-up VMI, five more live and go while the controller
    stands by, and no table its object graph reaches (queues included) holds more."""
    rig = ControllerRig(standby=True)
    await _vmi_lived_and_went(rig, "warm", _uid(100))
    before = sizes(rig.ctl, skip=(WatchedApi,))
    for i in range(1, 6):
        await _vmi_lived_and_went(rig, f"vmi{i}", _uid(100 + i))
    assert grown(before, sizes(rig.ctl, skip=(WatchedApi,))) == {}


async def test_a_standby_handlers_still_apply_the_kubevirt_configuration() -> None:
    """The KubeVirt CR reaches the standby's live configuration (virt-api's admission reads
    it) though the KubeVirt loop's queue stays empty."""
    rig = ControllerRig(standby=True)
    event = WatchEvent(WatchEventType.ADDED, kubevirt("32Mi"))
    rig.ctl.informers.kubevirts._apply(event)
    assert rig.ctl.live.current().migrations.bandwidth_mib == 32
    assert len(rig.ctl.loops.run.kubevirt.queue) == 0


async def test_election_queues_every_cached_key_once() -> None:
    """open_queues (the election) queues each loop's keys for what the caches hold, each
    once: the VMIs for the VMI loop, the VM for the VM loop, and for the budget loop the
    VMIs and the budget left by the VMI deleted meanwhile (not the gone VMI itself)."""
    rig = ControllerRig(standby=True)
    await _churn(rig)
    total = rig.ctl.open_queues()
    run = rig.ctl.loops.run
    queued = {loop.queue.name: await _drain(loop) for loop in _loops(rig)}
    assert sum(len(keys) for keys in queued.values()) == total
    for loop in _loops(rig):
        keys = queued[loop.queue.name]
        assert len(keys) == len(set(keys)) == _adds(rig, loop), loop.queue.name
    assert sorted(queued[run.vmi.queue.name]) == ["ns/a", "ns/b"]
    assert queued[run.vm.queue.name] == ["ns/v1"]
    assert sorted(queued[run.budgets.queue.name]) == ["ns/a", "ns/b", "ns/gone"]
    assert "ns/gone" not in queued[run.vmi.queue.name] + queued[run.evacuation.queue.name]


async def test_the_new_leader_acts_on_what_changed_while_it_stood_by() -> None:
    """After the election the loops sync what they were given: VMI b gets its launcher
    pod, the VM its VMI, and the budget of the VMI deleted meanwhile is deleted."""
    rig = ControllerRig(standby=True)
    await _churn(rig)
    rig.ctl.open_queues()
    await rig.settle()
    objects = rig.api.objects
    pods_of_b = [
        o
        for (plural, _), o in objects.items()
        if plural == PODS.plural and o["metadata"]["labels"].get(CREATED_BY_LABEL) == _uid(1)
    ]
    assert len(pods_of_b) == 1
    assert (VMIS.plural, "ns/v1") in objects
    assert (PDBS.plural, f"ns/{budget_name('gone')}") not in objects


async def test_a_leader_queues_each_change_at_once() -> None:
    """A leading controller's handlers queue as they did before the gate: a new VMI's key
    is in the VMI queue as soon as its event arrives."""
    rig = ControllerRig()
    assert rig.ctl.leading.is_set()
    raw = vmi_dict("fresh")
    raw["metadata"]["uid"] = _uid(5)
    await rig.api.create(VMIS, raw, namespace="ns")
    assert await _drain(cast(Reconciler, rig.ctl.loops.run.vmi)) == ["ns/fresh"]
