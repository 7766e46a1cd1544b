"""VirtualMachinePool policies of KubeVirt 1.8 (controller/pool/policies.py through
plan_pool): selectionPolicy.selectors narrowing scale-in and update, maxUnavailable bounding
a proactive update's restarts, autohealing's minFailingToStartDuration."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.pool.policies import max_unavailable, next_heal_check, requirement_matches
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.pool import NodeSelectorRequirement, PoolSpec, VirtualMachinePool
from tests.unit.controller.builders import NOW, ago
from tests.unit.controller.pool.test_logic import plan, pool, pool_dict, vm

READY_VMI = VirtualMachineInstance.from_dict(
    {"metadata": {"name": "x"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
)


def labelled(p: VirtualMachinePool, index: int, **template: Any) -> VirtualMachine:
    """VM `index` with extra template labels / nodeSelector."""
    raw = vm(p, index).to_dict()
    tpl = raw["spec"]["template"]
    tpl["metadata"]["labels"].update(template.get("labels", {}))
    tpl["spec"]["nodeSelector"] = template.get("nodeSelector", {})
    return VirtualMachine.from_dict(raw)


def test_scale_in_only_deletes_vms_the_selectors_allow() -> None:
    """Scale-in with selectors (labelSelector and nodeSelectorRequirementMatcher): only
    VMs matching both go, in the sort order, even when fewer than the surplus match."""
    selectors = {
        "labelSelector": {"matchLabels": {"tier": "spare"}},
        "nodeSelectorRequirementMatcher": [{"key": "zone", "operator": "In", "values": ["b"]}],
    }
    policy = {"sortPolicy": "AscendingOrder", "selectors": selectors}
    p = pool(0, scaleInStrategy={"proactive": {"selectionPolicy": policy}})
    vms = [
        labelled(p, 0, labels={"tier": "spare"}, nodeSelector={"zone": "a"}),
        labelled(p, 1, labels={"tier": "spare"}, nodeSelector={"zone": "b"}),
        labelled(p, 2, labels={"tier": "main"}, nodeSelector={"zone": "b"}),
        labelled(p, 3, labels={"tier": "spare"}, nodeSelector={"zone": "b"}),
    ]
    assert [v.name for v in plan(p, vms).delete] == ["p-1", "p-3"]


def _new_template(**spec: Any) -> VirtualMachinePool:
    raw = copy.deepcopy(pool_dict(4, **spec))
    raw["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]["memory"] = {
        "guest": "96Mi"
    }
    return VirtualMachinePool.from_dict(raw)


def test_update_selectors_choose_the_vms_updated() -> None:
    """updateStrategy.proactive.selectionPolicy.selectors: only matching outdated VMs are
    rolled (KubeVirt's rule); the others keep their revision."""
    selectors = {"labelSelector": {"matchLabels": {"canary": "yes"}}}
    update = {"proactive": {"selectionPolicy": {"selectors": selectors}}}
    old = pool(4)
    vms = [labelled(old, i, labels={"canary": "yes" if i % 2 else "no"}) for i in range(4)]
    got = plan(_new_template(updateStrategy=update), vms)
    assert sorted(v.name for v in got.update) == ["p-1", "p-3"]


@pytest.mark.parametrize(
    ("value", "replicas", "count"),
    [
        pytest.param(None, 4, 4, id="default-100%"),
        pytest.param(2, 4, 2, id="count"),
        pytest.param("50%", 5, 2, id="percent-rounded-down"),
        pytest.param("10%", 4, 1, id="at-least-one"),
        pytest.param(0, 4, 1, id="zero-is-one"),
    ],
)
def test_max_unavailable_as_a_count(value: Any, replicas: int, count: int) -> None:
    """maxUnavailable: a count, or a percentage of spec.replicas rounded down; at least 1."""
    assert max_unavailable(PoolSpec(replicas=replicas, max_unavailable=value)) == count


def test_proactive_update_restarts_within_max_unavailable() -> None:
    """maxUnavailable 2 over four Ready VMs, one of them already unavailable (not Ready):
    that one is rolled without using the budget, and one more (2 - 1 unavailable)."""
    old = pool(4)
    vms = [vm(old, 0), vm(old, 1, ready=True), vm(old, 2, ready=True), vm(old, 3, ready=True)]
    vmis = {f"p-{i}": READY_VMI for i in range(4)}
    got = plan(_new_template(maxUnavailable=2, updateStrategy={"proactive": {"selectionPolicy": {"sortPolicy": "AscendingOrder"}}}), vms, **vmis)  # fmt: skip
    assert [v.name for v in got.update] == ["p-0", "p-1"] and got.restart
    no_vmi = plan(_new_template(maxUnavailable=2), [vm(old, i, ready=True) for i in range(4)])
    assert len(no_vmi.update) == 4  # VMs without a VMI are unavailable already


def test_opportunistic_update_is_not_bounded() -> None:
    """An opportunistic update restarts nothing: every outdated VM is rewritten."""
    old = pool(4)
    vms = [vm(old, i, ready=True) for i in range(4)]
    got = plan(_new_template(maxUnavailable=1, updateStrategy={"opportunistic": {}}), vms,
               **{f"p-{i}": READY_VMI for i in range(4)})  # fmt: skip
    assert len(got.update) == 4 and not got.restart


def _failing(p: VirtualMachinePool, index: int, *, status: str, since: float) -> VirtualMachine:
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": ago(since)}
    return vm(p, index, printableStatus=status, conditions=[ready])


def test_autohealing_replaces_a_vm_failing_for_min_failing_to_start_duration() -> None:
    """A VM in CrashLoopBackOff (or ErrorUnschedulable …) not Ready for at least
    minFailingToStartDuration is replaced; younger failures, or a Stopped VM, are not;
    the next check is due when the youngest failure comes of age."""
    p = pool(4, autohealing={"minFailingToStartDuration": "2m"})
    vms = [
        _failing(p, 0, status="CrashLoopBackOff", since=180),
        _failing(p, 1, status="ErrorUnschedulable", since=60),
        _failing(p, 2, status="Stopped", since=900),
        vm(p, 3, ready=True),
    ]
    assert [v.name for v in plan(p, vms).delete] == ["p-0"]
    assert next_heal_check(vms, p.spec.autohealing, now=NOW) == pytest.approx(60)


def test_autohealing_default_min_failing_duration_is_five_minutes() -> None:
    """Without minFailingToStartDuration KubeVirt's 5 minutes apply."""
    p = pool(2, autohealing={})
    vms = [_failing(p, 0, status="ErrImagePull", since=290),
           _failing(p, 1, status="ImagePullBackOff", since=310)]  # fmt: skip
    assert [v.name for v in plan(p, vms).delete] == ["p-1"]


@pytest.mark.parametrize(
    ("operator", "values", "labels", "want"),
    [
        pytest.param("In", ("a", "b"), {"k": "b"}, True, id="in"),
        pytest.param("NotIn", ("a",), {"k": "a"}, False, id="not-in"),
        pytest.param("NotIn", ("a",), {}, True, id="not-in-absent"),
        pytest.param("Exists", (), {"k": ""}, True, id="exists"),
        pytest.param("DoesNotExist", (), {"k": "x"}, False, id="does-not-exist"),
        pytest.param("Gt", ("3",), {"k": "4"}, True, id="gt"),
        pytest.param("Lt", ("3",), {"k": "4"}, False, id="lt"),
        pytest.param("Gt", ("3",), {"k": "x"}, False, id="gt-not-a-number"),
    ],
)  # fmt: skip
def test_node_selector_requirements(
    operator: str, values: tuple[str, ...], labels: dict[str, str], want: bool
) -> None:
    """Each node selector operator against a VM template's nodeSelector."""
    req = NodeSelectorRequirement(key="k", operator=operator, values=values)
    assert requirement_matches(req, labels) is want
