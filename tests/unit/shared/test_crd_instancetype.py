"""The instancetype.kubevirt.io/v1beta1 CRDs: committed YAML equals what the model
generates, with KubeVirt's names and scopes, and manifests/base lists every one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.model.crd import instancetype_filename, render_instancetype
from shared.model.instancetype import INSTANCETYPE_KINDS, InstancetypeObject

BASE = Path(__file__).resolve().parents[3] / "manifests" / "base"


@pytest.mark.parametrize("cls", INSTANCETYPE_KINDS, ids=lambda c: c.KIND)
def test_committed_instancetype_crd_equals_generated(cls: type[InstancetypeObject]) -> None:
    """manifests/base holds exactly what `python -m shared.model.crd` generates."""
    committed = (BASE / instancetype_filename(cls)).read_text()
    assert committed == render_instancetype(cls), "regenerate: python -m shared.model.crd"
    crd = yaml.safe_load(committed)
    assert crd["metadata"]["name"] == f"{cls.PLURAL}.instancetype.kubevirt.io"
    assert crd["spec"]["scope"] == ("Namespaced" if "Cluster" not in cls.KIND else "Cluster")
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1beta1"


def test_kustomization_lists_every_instancetype_crd() -> None:
    """Deploying the base installs the four kinds."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    for cls in INSTANCETYPE_KINDS:
        assert instancetype_filename(cls) in kustomization["resources"]
