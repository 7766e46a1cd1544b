"""Validation of domain.cpu.features (KubeVirt's rules, and libvirt's): each names a
feature and, optionally, one of libvirt's policies (force, require, optional, disable,
forbid; unset or "" means require, as KubeVirt). Ours on top: the name is one a node label
key can hold (require and forbid select nodes by `cpu-feature.node.kubevirt.io/<name>`),
and a feature is named once (libvirt refuses a repeated one when the domain starts).

Whether any node offers a feature or a model is not known here: a VMI asking for one no
node labels stays Pending with the scheduler's reason (docs/node-resources.md).
"""

from __future__ import annotations

from shared.cpulabels import valid_name
from shared.model._validate_common import Errors
from shared.model.domain import DomainSpec
from shared.model.enums import CPUFeaturePolicy

VALUES = frozenset(str(p) for p in CPUFeaturePolicy)
POLICIES = ", ".join(str(p) for p in CPUFeaturePolicy)


def validate_cpu_features(errs: Errors, path: str, domain: DomainSpec) -> None:
    """Every feature has a name, named once, and a known policy."""
    seen: set[str] = set()
    for i, feature in enumerate(domain.cpu.features):
        where = f"{path}.cpu.features[{i}]"
        name = feature.name
        if not name:
            errs.add(f"{where}.name", "must name a CPU feature", name)
        elif not valid_name(name):
            errs.add(f"{where}.name", "must be a CPU feature name (letters, digits, ._-)", name)
        elif name in seen:
            errs.add(f"{where}.name", "names a feature already listed", name)
        seen.add(name or "")
        policy = feature.policy
        if policy and policy not in VALUES:
            errs.add(f"{where}.policy", f"must be one of {POLICIES}", policy)
