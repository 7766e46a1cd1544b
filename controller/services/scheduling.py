"""The pod-level fields a VMI carries to its launcher pod, as KubeVirt's template service
does: affinity, tolerations, topologySpreadConstraints, schedulerName and
priorityClassName as written; the pod's hostname (spec.hostname, else the VMI's name up
to its first dot, at most 63 characters), subdomain, dnsPolicy and dnsConfig.
(nodeSelector is merged by the template itself, with the schedulable label.)

A migration target keeps the VMI's affinity and adds one required node term: not the
source node (`excluding_node`); a VMIM's addedNodeSelector joins the pod's nodeSelector
without overriding a key the VMI sets (`with_added_selector`): it only restricts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.model import VirtualMachineInstance
from shared.model._codec import copy_json

MAX_HOSTNAME = 63


def hostname(vmi: VirtualMachineInstance) -> str:
    """spec.hostname, else the VMI's name cut at its first dot and to 63 characters."""
    if vmi.spec.hostname:
        return vmi.spec.hostname
    return vmi.name.split(".")[0][:MAX_HOSTNAME].rstrip("-")


def pod_fields(vmi: VirtualMachineInstance) -> dict[str, Any]:
    """The launcher pod's spec keys taken from the VMI (absent ones left out)."""
    spec = vmi.spec
    out: dict[str, Any] = {"hostname": hostname(vmi)}
    if spec.affinity is not None:
        out["affinity"] = spec.affinity.to_dict()
    if spec.tolerations:
        out["tolerations"] = [t.to_dict() for t in spec.tolerations]
    if spec.topology_spread_constraints:
        out["topologySpreadConstraints"] = [c.to_dict() for c in spec.topology_spread_constraints]
    optional = {
        "schedulerName": spec.scheduler_name,
        "priorityClassName": spec.priority_class_name,
        "subdomain": spec.subdomain,
        "dnsPolicy": str(spec.dns_policy) if spec.dns_policy is not None else None,
    }
    out.update({k: v for k, v in optional.items() if v})
    if spec.dns_config is not None:
        out["dnsConfig"] = spec.dns_config.to_dict()
    return out


def excluding_node(affinity: Mapping[str, Any] | None, node: str) -> dict[str, Any]:
    """`affinity` (copied) whose required node affinity also says "not on `node`": the
    term is added to every nodeSelectorTerm (terms are ORed), or is the only term."""
    out: dict[str, Any] = copy_json(dict(affinity or {}))
    not_node = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    node_affinity = out.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [*term.get("matchFields", []), not_node]
    required["nodeSelectorTerms"] = terms
    return out


def with_added_selector(
    node_selector: Mapping[str, str], added: Mapping[str, str]
) -> dict[str, str]:
    """`node_selector` plus the `added` labels; on a shared key the VMI's value stays
    (KubeVirt: addedNodeSelector can restrict, never bypass, the VMI's constraints)."""
    return {**node_selector, **{k: v for k, v in added.items() if k not in node_selector}}
