"""A VMIM's spec.addedNodeSelector in the migration controller: the nodes the target pod's
nodeSelector matches, a target pod unschedulable because none but the source matches
failing at once naming the field, and the target pod the controller creates."""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.config import MigrationConfig
from controller.migration.logic import Capacity, MigrationInputs, MigrationPlan, plan_migration
from controller.migration.selector import matching_nodes
from controller.node.logic import decode_node
from shared.launcherpod import LauncherPod
from shared.model import MigrationPhase, VirtualMachineInstanceMigration
from tests.unit.controller.builders import NOW, ago, make_migration, unschedulable
from tests.unit.controller.migration.test_controller import rig, target_pods
from tests.unit.controller.migration.test_logic import SOURCE, running_vmi, target

LIMITS = MigrationConfig(unschedulable_timeout=60)
HOST = "kubernetes.io/hostname"


def node(name: str, **labels: str) -> dict[str, Any]:
    all_labels = {HOST: name, "kubevirt.io/schedulable": "true", **labels}
    return {"metadata": {"name": name, "labels": all_labels}}


def decide(
    m: VirtualMachineInstanceMigration, pod: LauncherPod, nodes: frozenset[str] | None
) -> MigrationPlan:
    inputs = MigrationInputs(
        migration=m,
        vmi=running_vmi(),
        pods=[SOURCE, pod],
        capacity=Capacity(),
        now=NOW,
        config=LIMITS,
        selector_nodes=nodes,
    )
    return plan_migration(inputs)


def reason(p: MigrationPlan) -> str:
    state = p.status.migration_state
    return (state.failure_reason if state else None) or ""


def test_matching_nodes_reads_every_label_of_the_target_selector() -> None:
    """A node matches when it carries the added labels, the VMI's nodeSelector and the
    schedulable label; on a shared key the VMI's value is the one matched."""
    nodes = [
        decode_node(node("node01", zone="a")),
        decode_node(node("node02", zone="a", disk="ssd")),
        decode_node(node("node03", disk="ssd")),
        decode_node({"metadata": {"name": "node04", "labels": {"disk": "ssd", "zone": "a"}}}),
    ]
    vmi = running_vmi()
    vmi = dataclasses.replace(vmi, spec=dataclasses.replace(vmi.spec, node_selector={"zone": "a"}))
    assert matching_nodes(vmi, {"disk": "ssd"}, nodes) == {"node02"}
    assert matching_nodes(vmi, {"zone": "b"}, nodes) == {"node01", "node02"}


def test_nothing_but_the_source_matching_fails_at_once_naming_the_field() -> None:
    """Target pod unschedulable, the selector matching no node (or only the source):
    Failed before the timeout, the reason naming spec.addedNodeSelector, the pod deleted."""
    m = make_migration(phase="Scheduling")
    m = dataclasses.replace(
        m, spec=dataclasses.replace(m.spec, added_node_selector={HOST: "nowhere"})
    )
    pod = target(conditions=unschedulable(ago(1), "0/2 nodes: didn't match selector"))
    for nodes in (frozenset(), frozenset({"node01"})):
        p = decide(m, pod, nodes)
        assert p.status.phase == MigrationPhase.FAILED and p.delete_pods == (pod,)
        assert reason(p).startswith(f"spec.addedNodeSelector {{{HOST}=nowhere}} matches no node")
        assert "didn't match selector" in reason(p)


def test_a_matching_node_waits_for_the_scheduler_then_names_the_field() -> None:
    """Another node matches (it may be full): wait the unschedulable timeout as without a
    selector; past it, the reason also names spec.addedNodeSelector."""
    m = make_migration(phase="Scheduling")
    m = dataclasses.replace(
        m, spec=dataclasses.replace(m.spec, added_node_selector={HOST: "node02"})
    )
    young = target(conditions=unschedulable(ago(10)))
    p = decide(m, young, frozenset({"node02"}))
    assert p.status.phase == MigrationPhase.SCHEDULING and p.requeue_after == 50
    old = target(conditions=unschedulable(ago(61)))
    p = decide(m, old, frozenset({"node02"}))
    assert p.status.phase == MigrationPhase.FAILED
    assert f"(with spec.addedNodeSelector {{{HOST}=node02}})" in reason(p)


async def test_the_controller_creates_the_target_pod_with_the_selector() -> None:
    """The controller renders the target pod with the added labels in its nodeSelector,
    next to the schedulable label, the source node still excluded."""
    api, ctl = rig(MigrationConfig())
    store = ctl._informers.migrations.store
    m = store.get("ns/ma")
    assert m is not None
    spec = dataclasses.replace(m.spec, added_node_selector={HOST: "node02"})
    store.upsert("ns/ma", dataclasses.replace(m, spec=spec))
    ctl._informers.nodes.store.upsert("node02", decode_node(node("node02")))
    await ctl.sync("ns/ma")
    [key] = target_pods(api)
    pod_spec = api.objects[("pods", key)]["spec"]
    assert pod_spec["nodeSelector"] == {"kubevirt.io/schedulable": "true", HOST: "node02"}
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node01"]
