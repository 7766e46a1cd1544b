"""The CRDs in manifests/base and the dataclass model cannot drift apart.

Three guards: the committed CRD YAML equals what shared.model.crd generates; an
independent walk of the dataclasses (field → camelCase path → type) matches the schema
in both directions; and `kubectl kustomize manifests/base` (or, without kubectl, the
kustomization's resource list) builds the namespace and the three CRDs.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import shutil
import subprocess
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared import model
from shared.model import KubeObject, Model
from shared.model._codec import wire_key
from shared.model.crd import EXPORT_KINDS, KINDS, POOL_KINDS, CRDInfo, build_crd, render

REPO = Path(__file__).resolve().parents[3]
BASE = REPO / "manifests" / "base"
KIND_IDS = [pytest.param(info, id=info.cls.KIND) for info in KINDS]
ALL_IDS = [
    *KIND_IDS,
    *(pytest.param(info, id=info.cls.KIND) for info in (*POOL_KINDS, *EXPORT_KINDS)),
]


def _strip_none(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
    return tp


def _model_kind(tp: Any) -> str:
    """The schema kind a (None-stripped) annotation must map to."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    kind = {str: "string", int: "integer", bool: "boolean", tuple: "array", Mapping: "map"}
    if origin in (typing.Union, types.UnionType):
        assert str in args, f"unsupported union {tp}"
        return "int-or-string" if set(args) == {str, int} else "string"
    if origin is not None:
        return kind[origin]
    if issubclass(tp, enum.StrEnum):
        return "enum:" + ",".join(m.value for m in tp)
    return "object" if issubclass(tp, Model) else kind[tp]


def model_paths(cls: type[Model], prefix: str, out: dict[str, str]) -> dict[str, str]:
    """Every JSON path the model types below `prefix`, with its schema kind."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        tp = _strip_none(hints[f.name])
        path = f"{prefix}.{wire_key(f)}"
        out[path] = _model_kind(tp)
        if typing.get_origin(tp) is tuple:
            item = typing.get_args(tp)[0]
            out[f"{path}[]"] = _model_kind(item)
            if isinstance(item, type) and issubclass(item, Model):
                model_paths(item, f"{path}[]", out)
        elif isinstance(tp, type) and issubclass(tp, Model):
            model_paths(tp, path, out)
    return out


def _schema_kind(node: Mapping[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    kind = node.get("type")
    if kind == "object":
        return "map" if "additionalProperties" in node else "object"
    if kind == "string" and "enum" in node:
        return "enum:" + ",".join(node["enum"])
    assert isinstance(kind, str), f"schema node without a type: {node}"
    return kind


def schema_paths(node: Mapping[str, Any], prefix: str, out: dict[str, str]) -> dict[str, str]:
    """Every typed property path in an OpenAPI schema below `prefix`, with its kind."""
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}.{key}"
        out[path] = _schema_kind(child)
        if child.get("type") == "array":
            items = child["items"]
            out[f"{path}[]"] = _schema_kind(items)
            schema_paths(items, f"{path}[]", out)
        else:
            schema_paths(child, path, out)
    return out


def committed_crd(info: CRDInfo) -> dict[str, Any]:
    """The committed CRD manifest of one kind (libyaml's loader when PyYAML has it: each
    test of the module parses it again)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load((BASE / info.filename).read_text(), Loader=loader)
    assert isinstance(data, dict)
    return data


def root_schema(info: CRDInfo) -> dict[str, Any]:
    """The openAPIV3Schema of the committed CRD (its storage version's)."""
    [version] = [v for v in committed_crd(info)["spec"]["versions"] if v["storage"]]
    schema = version["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


@pytest.mark.parametrize("info", ALL_IDS)
def test_committed_crd_equals_generated(info: CRDInfo) -> None:
    """manifests/base holds exactly what `python -m shared.model.crd` generates."""
    committed = (BASE / info.filename).read_text()
    assert committed == render(info), f"regenerate: python -m shared.model.crd {BASE}"


@pytest.mark.parametrize("info", ALL_IDS)
@pytest.mark.parametrize("part", ["spec", "status"])
def test_model_and_schema_have_the_same_paths_and_types(info: CRDInfo, part: str) -> None:
    """Every model field is in the schema with a compatible type, and vice versa."""
    hints = typing.get_type_hints(info.cls)
    expected = model_paths(hints[part], part, {})
    actual = schema_paths(root_schema(info)["properties"][part], part, {})
    missing = sorted(set(expected) - set(actual))
    untyped = sorted(set(actual) - set(expected))
    wrong = sorted(p for p in set(expected) & set(actual) if expected[p] != actual[p])
    assert not missing, f"model fields missing from the CRD: {missing}"
    assert not untyped, f"CRD properties with no model field: {untyped}"
    assert not wrong, [(p, expected[p], actual[p]) for p in wrong]


def _object_nodes(node: Mapping[str, Any], path: str) -> list[tuple[str, Mapping[str, Any]]]:
    found = [(path, node)] if node.get("type") == "object" else []
    for key, child in node.get("properties", {}).items():
        found += _object_nodes(child, f"{path}.{key}")
    if "items" in node:
        found += _object_nodes(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("info", ALL_IDS)
def test_schema_is_structural_and_preserves_unknown_fields(info: CRDInfo) -> None:
    """Every spec/status object keeps unknown fields (as the model does); every node is typed."""
    schema = root_schema(info)
    assert schema["required"] == ["spec"]
    for part in ("spec", "status"):
        for path, node in _object_nodes(schema["properties"][part], part):
            if "additionalProperties" in node:
                assert "properties" not in node, path
                continue
            assert node.get("x-kubernetes-preserve-unknown-fields") is True, path
    for path, kind in schema_paths(schema, "", {}).items():
        assert kind, path


SHORT_NAMES = {
    "VirtualMachineInstance": ["vmi", "vmis"],
    "VirtualMachine": ["vm", "vms"],
    "VirtualMachineInstanceMigration": ["vmim", "vmims"],
    "KubeVirt": ["kv", "kvs"],
    "VirtualMachineInstanceReplicaSet": ["vmirs", "vmirss"],
}
# The kinds with a scale subresource (kubectl scale, an HPA), and its paths.
SCALE = {
    "VirtualMachineInstanceReplicaSet": {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    },
}
COLUMNS = {
    "VirtualMachineInstance": [
        "Age",
        "Phase",
        "IP",
        "NodeName",
        "Ready",
        "Live-Migratable",
        "Paused",
    ],
    "VirtualMachine": ["Age", "Status", "Ready"],
    "VirtualMachineInstanceMigration": ["Phase", "VMI"],
    "KubeVirt": ["Age", "Phase"],
    "VirtualMachineInstanceReplicaSet": ["Desired", "Current", "Ready", "Age"],
}


@pytest.mark.parametrize("info", KIND_IDS)
def test_crd_names_columns_and_status_subresource(info: CRDInfo) -> None:
    """Short names, categories, printer columns and the status subresource match KubeVirt."""
    crd = committed_crd(info)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{info.cls.PLURAL}.kubevirt.io"
    assert spec["group"] == "kubevirt.io" and spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == SHORT_NAMES[info.cls.KIND]
    assert spec["names"]["categories"] == ["all"]
    [version] = spec["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    scale = SCALE.get(info.cls.KIND)
    expected: dict[str, Any] = {"status": {}} if scale is None else {"status": {}, "scale": scale}
    assert version["subresources"] == expected
    assert [c["name"] for c in version["additionalPrinterColumns"]] == COLUMNS[info.cls.KIND]


def test_ready_and_status_columns_read_the_right_fields() -> None:
    """The VMI Ready/IP columns and the VM Status column point at the model's fields."""
    by_kind = {info.cls.KIND: committed_crd(info) for info in KINDS}
    vmi_cols = {
        c["name"]: c["jsonPath"]
        for c in by_kind["VirtualMachineInstance"]["spec"]["versions"][0][
            "additionalPrinterColumns"
        ]
    }
    assert vmi_cols["Ready"] == ".status.conditions[?(@.type=='Ready')].status"
    assert vmi_cols["IP"] == ".status.interfaces[0].ipAddress"
    vm_cols = by_kind["VirtualMachine"]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert {"name": "Status", "type": "string", "jsonPath": ".status.printableStatus"} in vm_cols


def find_kubectl() -> str | None:
    """The version-matched kubectl from the cache, else one on PATH."""
    cache = Path(os.environ.get("KUBEVIRT_PY_CACHE", Path.home() / ".cache" / "kubevirt-py"))
    for candidate in sorted(cache.glob("kube/*/bin/kubectl"), reverse=True):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("kubectl")


def built_documents() -> list[dict[str, Any]]:
    """The documents `kubectl kustomize manifests/base` emits (PyYAML fallback without it)."""
    kubectl = find_kubectl()
    if kubectl is not None:
        result = subprocess.run(
            [kubectl, "kustomize", str(BASE)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return [d for d in yaml.safe_load_all(result.stdout) if d]
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    docs = []
    for resource in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((BASE / resource).read_text()) if d]
    return docs


def test_kustomization_builds_namespace_and_crds() -> None:
    """manifests/base builds and contains the kubevirt namespace and the three CRDs."""
    docs = built_documents()
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Namespace", "kubevirt") in names
    for info in KINDS:
        assert ("CustomResourceDefinition", f"{info.cls.PLURAL}.kubevirt.io") in names


def test_kustomization_lists_every_crd_file() -> None:
    """Each generated CRD file is a resource of the kustomization (so none is forgotten)."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    for info in KINDS:
        assert info.filename in kustomization["resources"]


def test_every_kind_has_a_crd() -> None:
    """Every top-level model class exported by shared.model is described by a CRD."""
    exported = {getattr(model, name) for name in model.__all__}
    top_level = {c for c in exported if isinstance(c, type) and issubclass(c, KubeObject)}
    assert top_level - {KubeObject} == {info.cls for info in KINDS}


def test_exports_are_served_as_v1_and_v1beta1_with_one_storage_version() -> None:
    """VirtualMachineExport is served as export.kubevirt.io/v1 (GA in KubeVirt v1.9) and
    v1beta1 with the same schema; v1beta1 stays the one storage version."""
    versions = build_crd(EXPORT_KINDS[0])["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [
        ("v1beta1", True, True),
        ("v1", True, False),
    ]
    assert versions[0]["schema"] == versions[1]["schema"]
