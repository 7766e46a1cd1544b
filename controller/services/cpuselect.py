"""Where a launcher pod may run for its VMI's CPU: KubeVirt's node selectors on the node
labeller's keys (shared/cpulabels.py), so the scheduler places it only on a node whose
libvirt offers what the guest asks for, and a VMI asking for what no node has stays
Pending with the scheduler's reason (PodScheduled=False, Unschedulable).

- `cpu.model` naming a model: `cpu-model.node.kubevirt.io/<model>: "true"`; host-model
  and host-passthrough select nothing (KubeVirt's rule for a VMI's first pod);
- `cpu.features` with policy require (or unset): `cpu-feature.node.kubevirt.io/<f>: "true"`,
  as KubeVirt; forbid: a required node-affinity expression `<key> DoesNotExist` (libvirt
  refuses to start a guest forbidding a feature the host CPU has), added to every
  nodeSelectorTerm; force, optional and disable select nothing (force claims the feature
  whatever the host has).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.cpulabels import feature_label, model_label
from shared.model import VirtualMachineInstance
from shared.model._codec import copy_json
from shared.model.enums import CPUFeaturePolicy

HOST_MODES = frozenset({"host-model", "host-passthrough"})
TRUE = "true"


def _policy(raw: str | None) -> str:
    return raw or CPUFeaturePolicy.REQUIRE


def cpu_node_selector(vmi: VirtualMachineInstance) -> dict[str, str]:
    """The nodeSelector entries the VMI's CPU model and required features call for."""
    cpu = vmi.spec.domain.cpu
    selector: dict[str, str] = {}
    if cpu.model and cpu.model not in HOST_MODES:
        selector[model_label(cpu.model)] = TRUE
    for feature in cpu.features:
        if feature.name and _policy(feature.policy) == CPUFeaturePolicy.REQUIRE:
            selector[feature_label(feature.name)] = TRUE
    return selector


def forbidden_features(vmi: VirtualMachineInstance) -> tuple[str, ...]:
    """The features the VMI forbids (their nodes are avoided)."""
    features = vmi.spec.domain.cpu.features
    forbid = CPUFeaturePolicy.FORBID
    return tuple(f.name for f in features if f.name and _policy(f.policy) == forbid)


def avoiding_features(
    affinity: Mapping[str, Any] | None, features: tuple[str, ...]
) -> dict[str, Any]:
    """`affinity` (copied) whose required node affinity also says "no node labelled with
    any of `features`": the expressions go into every nodeSelectorTerm (terms are ORed),
    or make the only term."""
    out: dict[str, Any] = copy_json(dict(affinity or {}))
    absent = [{"key": feature_label(f), "operator": "DoesNotExist"} for f in features]
    node_affinity = out.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchExpressions"] = [*term.get("matchExpressions", []), *absent]
    required["nodeSelectorTerms"] = terms
    return out


def apply_cpu_placement(vmi: VirtualMachineInstance, spec: dict[str, Any]) -> None:
    """Add the CPU's node selector and forbidden-feature affinity to a pod spec."""
    spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **cpu_node_selector(vmi)}
    forbidden = forbidden_features(vmi)
    if forbidden:
        spec["affinity"] = avoiding_features(spec.get("affinity"), forbidden)
