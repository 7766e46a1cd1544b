"""The KubeVirt CR's obsoleteCPUModels: KubeVirt's default set until the CR names its own
(a map of model to true; set, even empty, it replaces the default)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.clusterconfig import ClusterConfig, resolve
from shared.cpulabels import DEFAULT_OBSOLETE_MODELS
from shared.model.kubevirt import KubeVirt


def _kv(configuration: dict[str, Any]) -> KubeVirt:
    meta = {"name": "kubevirt", "namespace": "kubevirt", "generation": 1}
    return KubeVirt.from_dict({"metadata": meta, "spec": {"configuration": configuration}})


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        pytest.param({}, DEFAULT_OBSOLETE_MODELS, id="unset-default"),
        pytest.param({"obsoleteCPUModels": {}}, frozenset(), id="empty-none-obsolete"),
        pytest.param(
            {"obsoleteCPUModels": {"Penryn": True, "qemu64": False}},
            frozenset({"Penryn"}),
            id="own-list",
        ),
    ],
)
def test_obsolete_models(configuration: dict[str, Any], expected: frozenset[str]) -> None:
    """Models mapped to true are obsolete; the CR's map replaces KubeVirt's default."""
    assert resolve(ClusterConfig(), _kv(configuration)).obsolete_cpu_models == expected


def test_the_field_round_trips() -> None:
    """obsoleteCPUModels keeps KubeVirt's spelling on the wire."""
    raw = {"obsoleteCPUModels": {"486": True}}
    assert _kv(raw).to_dict()["spec"]["configuration"] == raw
