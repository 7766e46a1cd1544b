"""VirtualMachinePool decisions: VM names and per-VM references, scale-out to the lowest
free indexes, scale-in order, template updates by strategy, autohealing and status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.pool.logic import (
    REVISION_LABEL,
    PoolPlan,
    World,
    plan_pool,
    pool_status,
    template_hash,
    vm_body,
    vm_spec,
)
from shared.model import VirtualMachine
from shared.model.pool import VirtualMachinePool
from tests.unit.controller.builders import NOW, ago

POOL_UID = "pool-uid"


def pool_dict(replicas: int = 2, **spec: Any) -> dict[str, Any]:
    """A pool of tiny VMs labelled pool=p, with a cloud-init secret and a DataVolume."""
    vmi_spec = {
        "domain": {"memory": {"guest": "64Mi"}, "devices": {}},
        "volumes": [
            {"name": "ci", "cloudInitNoCloud": {"secretRef": {"name": "userdata"}}},
            {"name": "data", "dataVolume": {"name": "data"}},
            {"name": "cm", "configMap": {"name": "settings"}},
        ],
    }
    return {
        "apiVersion": "pool.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePool",
        "metadata": {"name": "p", "namespace": "ns", "uid": POOL_UID},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"pool": "p"}},
            "virtualMachineTemplate": {
                "metadata": {"labels": {"pool": "p"}},
                "spec": {
                    "runStrategy": "Always",
                    "dataVolumeTemplates": [{"metadata": {"name": "data"}, "spec": {}}],
                    "template": {"metadata": {"labels": {"pool": "p"}}, "spec": vmi_spec},
                },
            },
            **spec,
        },
    }


def pool(replicas: int = 2, **spec: Any) -> VirtualMachinePool:
    return VirtualMachinePool.from_dict(pool_dict(replicas, **spec))


def plan(p: VirtualMachinePool, vms: list[VirtualMachine], **vmis: Any) -> PoolPlan:
    """plan_pool at NOW, with these VMIs (by VM name), shuffling nothing."""
    return plan_pool(p, vms, world=World(vmis=vmis, now=NOW), shuffle=lambda _: None)


def vm(p: VirtualMachinePool, index: int, *, age: float = 60, **status: Any) -> VirtualMachine:
    raw = vm_body(p, index)
    raw["metadata"]["uid"] = f"uid-{index}"
    raw["metadata"]["creationTimestamp"] = ago(age)
    raw["status"] = status
    return VirtualMachine.from_dict(raw)


def test_vm_names_and_per_vm_references() -> None:
    """`<pool>-<index>`; its DataVolume (and the volume naming it) get `-<index>`; secrets
    and configMaps only with nameGeneration."""
    plain = vm_spec(pool(), 3)
    assert plain["dataVolumeTemplates"][0]["metadata"]["name"] == "data-3"
    vols = {v["name"]: v for v in plain["template"]["spec"]["volumes"]}
    assert vols["data"]["dataVolume"]["name"] == "data-3"
    assert vols["ci"]["cloudInitNoCloud"]["secretRef"]["name"] == "userdata"
    gen = {"appendIndexToSecretRefs": True, "appendIndexToConfigMapRefs": True}
    named = vm_spec(pool(nameGeneration=gen), 3)
    vols = {v["name"]: v for v in named["template"]["spec"]["volumes"]}
    assert vols["ci"]["cloudInitNoCloud"]["secretRef"]["name"] == "userdata-3"
    assert vols["cm"]["configMap"]["name"] == "settings-3"
    body = vm_body(pool(), 3)
    assert body["metadata"]["name"] == "p-3"
    assert body["metadata"]["ownerReferences"][0]["uid"] == POOL_UID


def test_each_vm_gets_its_own_claim() -> None:
    """A persistentVolumeClaim volume naming a dataVolumeTemplate is renamed with the
    template (KubeVirt: each VM its own claim); one naming another claim is shared."""
    raw = pool_dict()
    volumes = raw["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["volumes"]
    volumes += [
        {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "shared", "persistentVolumeClaim": {"claimName": "common"}},
    ]
    specs = [vm_spec(VirtualMachinePool.from_dict(raw), i) for i in (0, 1)]
    for i, spec in enumerate(specs):
        vols = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
        assert vols["claim"]["persistentVolumeClaim"]["claimName"] == f"data-{i}"
        assert vols["data"]["dataVolume"]["name"] == f"data-{i}"
        assert vols["shared"]["persistentVolumeClaim"]["claimName"] == "common"
        assert [d["metadata"]["name"] for d in spec["dataVolumeTemplates"]] == [f"data-{i}"]


def test_scale_out_takes_the_lowest_free_indexes() -> None:
    """With p-1 present, scaling to 3 creates p-0 and p-2."""
    p = pool(3)
    assert plan(p, [vm(p, 1)]).create == (0, 2)


@pytest.mark.parametrize(
    ("policy", "doomed"),
    [
        pytest.param("DescendingOrder", ["p-2", "p-1"], id="descending"),
        pytest.param("AscendingOrder", ["p-0", "p-1"], id="ascending"),
        pytest.param("Newest", ["p-0", "p-1"], id="newest"),
        pytest.param("Oldest", ["p-2", "p-1"], id="oldest"),
    ],
)
def test_scale_in_follows_the_sort_policy(policy: str, doomed: list[str]) -> None:
    """Proactive scale-in deletes the surplus in the selection policy's order."""
    strategy = {"proactive": {"selectionPolicy": {"sortPolicy": policy}}}
    p = pool(1, scaleInStrategy=strategy)
    vms = [vm(p, 0, age=10), vm(p, 1, age=20), vm(p, 2, age=30)]
    assert [v.name for v in plan(p, vms).delete] == doomed


def test_unmanaged_scale_in_deletes_nothing() -> None:
    """scaleInStrategy.unmanaged: the pool leaves surplus VMs to the user."""
    p = pool(0, scaleInStrategy={"unmanaged": {}})
    assert plan(p, [vm(p, 0)]).delete == ()


def test_template_change_updates_by_strategy() -> None:
    """A VM of an older template is updated; proactive restarts it, opportunistic does
    not, unmanaged leaves it as it is."""
    old = pool(1)
    raw = copy.deepcopy(pool_dict(1))
    raw["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]["memory"] = {
        "guest": "96Mi"
    }
    new = VirtualMachinePool.from_dict(raw)
    assert template_hash(new) != template_hash(old)
    member = vm(old, 0)
    got = plan(new, [member])
    assert [v.name for v in got.update] == ["p-0"] and got.restart
    opportunistic = VirtualMachinePool.from_dict({**raw, "spec": {**raw["spec"],
                                                  "updateStrategy": {"opportunistic": {}}}})  # fmt: skip
    got = plan(opportunistic, [member])
    assert got.update and not got.restart
    unmanaged = VirtualMachinePool.from_dict({**raw, "spec": {**raw["spec"],
                                              "updateStrategy": {"unmanaged": {}}}})  # fmt: skip
    assert plan(unmanaged, [member]).update == ()
    assert member.metadata.labels[REVISION_LABEL] == template_hash(old)


def test_autohealing_replaces_a_vm_that_keeps_failing_to_start() -> None:
    """startUpFailureThreshold consecutive start failures: the VM is deleted (and made
    again under the same index on a later sync)."""
    p = pool(1, autohealing={"startUpFailureThreshold": 2})
    sick = vm(p, 0, startFailure={"consecutiveFailCount": 2})
    assert [v.name for v in plan(p, [sick]).delete] == ["p-0"]


def test_paused_pool_does_nothing_and_status_counts_ready() -> None:
    """Paused: no writes; status counts VMs and ready VMs, ReplicaPaused set."""
    p = pool(3, paused=True)
    vms = [vm(p, 0, ready=True), vm(p, 1)]
    assert plan(p, vms) == plan(p, [])
    status = pool_status(p, vms, error=None, now=NOW)
    assert (status.replicas, status.ready_replicas, status.label_selector) == (2, 1, "pool=p")
    assert [c.type for c in status.conditions] == ["ReplicaPaused"]
