"""A VMIM's spec.addedNodeSelector seen from the migration controller: which nodes the
target pod's nodeSelector (the VMI's, the schedulable label, the added labels) matches,
so that a target pod unschedulable because nothing matches fails the VMIM at once,
naming the field, instead of after the unschedulable timeout."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.node.logic import NodeView
from controller.services.scheduling import with_added_selector
from shared.labels import SCHEDULABLE_LABEL
from shared.model import VirtualMachineInstance

FIELD = "spec.addedNodeSelector"


def matching_nodes(
    vmi: VirtualMachineInstance, added: Mapping[str, str], nodes: Iterable[NodeView]
) -> frozenset[str]:
    """The names of the nodes whose labels carry every label of the target pod's
    nodeSelector (the VMI's affinity and the source exclusion are the scheduler's)."""
    own = {**vmi.spec.node_selector, SCHEDULABLE_LABEL: "true"}
    wanted = with_added_selector(own, added).items()
    return frozenset(n.name for n in nodes if all(n.labels.get(k) == v for k, v in wanted))


def describe(added: Mapping[str, str]) -> str:
    """`spec.addedNodeSelector {k=v, ...}`, for failure reasons."""
    labels = ", ".join(f"{k}={v}" for k, v in sorted(added.items()))
    return f"{FIELD} {{{labels}}}"
