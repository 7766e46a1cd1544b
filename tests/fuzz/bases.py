"""Valid objects to perturb: for kinds whose random objects are nearly always refused (a
VM needs a template, a snapshot a source), half of a run starts from one of these and
changes one to three fields at random schema paths, so admission's deeper checks and the
daemons see values at the edges on otherwise valid objects."""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any

from tests.fuzz.values import Knobs, value

_VMI_SPEC: dict[str, Any] = {
    "domain": {"memory": {"guest": "32Mi"}, "resources": {"requests": {"cpu": "10m"}}},
    "terminationGracePeriodSeconds": 0,
}
_VM_SPEC: dict[str, Any] = {"runStrategy": "Halted", "template": {"spec": _VMI_SPEC}}
_LABELS = {"matchLabels": {"app": "fz"}}
_VM_REF = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "fz-vm"}
SPECS: dict[str, dict[str, Any]] = {
    "VirtualMachine": _VM_SPEC,
    "VirtualMachineInstance": _VMI_SPEC,
    "VirtualMachineInstanceMigration": {"vmiName": "fz-vmi"},
    "VirtualMachineInstanceReplicaSet": {
        "replicas": 0,
        "selector": _LABELS,
        "template": {"metadata": {"labels": {"app": "fz"}}, "spec": _VMI_SPEC},
    },
    "VirtualMachinePool": {
        "replicas": 0,
        "selector": _LABELS,
        "virtualMachineTemplate": {"metadata": {"labels": {"app": "fz"}}, "spec": _VM_SPEC},
    },
    "VirtualMachineSnapshot": {"source": _VM_REF},
    "VirtualMachineRestore": {"target": _VM_REF, "virtualMachineSnapshotName": "fz-snap"},
    "VirtualMachineExport": {"source": _VM_REF},
    "VirtualMachineClone": {"source": _VM_REF, "target": {**_VM_REF, "name": "fz-clone"}},
    "VirtualMachineInstancetype": {"cpu": {"guest": 1}, "memory": {"guest": "64Mi"}},
    "VirtualMachineClusterInstancetype": {"cpu": {"guest": 1}, "memory": {"guest": "64Mi"}},
    "DataVolume": {
        "source": {"blank": {}},
        "storage": {"resources": {"requests": {"storage": "1Mi"}}},
    },
}


def perturbed(
    kind: str, spec_schema: Mapping[str, Any], rng: random.Random, *, knobs: Knobs
) -> dict[str, Any] | None:
    """The kind's valid spec with 1-3 fields replaced by generated values (None: no base)."""
    base = SPECS.get(kind)
    if base is None:
        return None
    spec = copy.deepcopy(base)
    for _ in range(rng.randint(1, 3)):
        set_at_random_path(spec, spec_schema, rng, knobs=knobs)
    return spec


def set_at_random_path(
    node: dict[str, Any], schema: Mapping[str, Any], rng: random.Random, *, knobs: Knobs
) -> None:
    """Walk down `schema` from `node` along random properties (an array's first item) and
    put a generated value at the end of the walk."""
    for _ in range(8):
        props = schema.get("properties") or {}
        if not props:
            return
        key = rng.choice(sorted(props))
        sub = props[key]
        items = sub.get("items") if sub.get("type") == "array" else None
        if rng.random() < 0.3 or (sub.get("type") != "object" and not items):
            node[key] = value(sub, rng, knobs=knobs, depth=4)
            return
        if items is not None:
            current = node.get(key)
            if not isinstance(current, list) or not current or not isinstance(current[0], dict):
                node[key] = current = [{}]
            node, schema = current[0], items
        else:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node, schema = node[key], sub
