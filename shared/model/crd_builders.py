"""CRD documents from model classes: a kind's openAPIV3Schema (its docstring's first line,
apiVersion, kind, metadata and the classes' own `openapi_schema`), and the whole
CustomResourceDefinition of a kind outside kubevirt.io (instancetype.kubevirt.io,
migrations.kubevirt.io). shared/model/crd.py writes them out."""

from __future__ import annotations

import typing
from typing import Any

from shared.model.instancetype import INSTANCETYPE_GROUP, INSTANCETYPE_VERSION, InstancetypeObject
from shared.model.migrationpolicy import MigrationPolicy
from shared.model.objects import KubeObject


def kind_schema(cls: type[Any], **parts: dict[str, Any]) -> dict[str, Any]:
    """A kind's openAPIV3Schema: its docstring's first line, apiVersion, kind, metadata and
    `parts` (spec, status …)."""
    return {
        "description": (cls.__doc__ or "").strip().splitlines()[0],
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            **parts,
        },
    }


def object_schema(cls: type[KubeObject]) -> dict[str, Any]:
    """The openAPIV3Schema of a top-level kind: apiVersion, kind, metadata, spec, status."""
    hints = typing.get_type_hints(cls)
    return {
        **kind_schema(
            cls, spec=hints["spec"].openapi_schema(), status=hints["status"].openapi_schema()
        ),
        "required": ["spec"],
    }


def build_instancetype_crd(cls: type[InstancetypeObject]) -> dict[str, Any]:
    """The CRD of an instancetype.kubevirt.io/v1beta1 kind (no status, as KubeVirt's)."""
    return build_group_crd(cls, group=INSTANCETYPE_GROUP, version=INSTANCETYPE_VERSION)


def build_group_crd(
    cls: type[InstancetypeObject] | type[MigrationPolicy], *, group: str, version: str
) -> dict[str, Any]:
    """The CRD of a kind outside kubevirt.io (its names from the class; no status)."""
    spec_schema = typing.get_type_hints(cls)["spec"].openapi_schema()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{cls.PLURAL}.{group}",
            "labels": {"app.kubernetes.io/part-of": "kubevirt-py"},
        },
        "spec": {
            "group": group,
            "names": {
                "kind": cls.KIND,
                "listKind": f"{cls.KIND}List",
                "plural": cls.PLURAL,
                "singular": cls.SINGULAR,
                "shortNames": list(cls.SHORT_NAMES),
                "categories": ["all"],
            },
            "scope": "Namespaced" if cls.NAMESPACED else "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            **kind_schema(cls, spec=spec_schema),
                            "required": ["spec"],
                        }
                    },
                }
            ],
        },
    }
