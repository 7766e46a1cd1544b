"""cpu.features in the domain XML: one `<feature policy name>` each, after the topology,
and host-model when no model is named (libvirt wants a model for features)."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher.domxml import build
from launcher.plan import cpu_features
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN

FEATURES = (("pcid", "require"), ("vme", "disable"), ("x2apic", "forbid"))


@pytest.mark.parametrize(
    ("model", "mode"),
    [
        pytest.param("Westmere", "custom", id="named"),
        pytest.param(None, "host-model", id="default-becomes-host-model"),
    ],
)
def test_features_render_after_the_topology(model: str | None, mode: str) -> None:
    """Each feature with its policy, in order, after <topology> (libvirt's order)."""
    plan = dataclasses.replace(PLAN, cpu_model=model, cpu_features=FEATURES)
    cpu = ET.fromstring(build(plan)).find("cpu")
    assert cpu is not None and cpu.get("mode") == mode
    tags = [child.tag for child in cpu]
    assert tags[-3:] == ["feature"] * 3 and tags[-4] == "topology"
    found = [(f.get("name"), f.get("policy")) for f in cpu.findall("feature")]
    assert found == list(FEATURES)


def test_passes_virt_xml_validate(tmp_path: Path) -> None:
    """libvirt's schema accepts the features."""
    path = tmp_path / "domain.xml"
    path.write_text(build(dataclasses.replace(PLAN, cpu_model="Penryn", cpu_features=FEATURES)))
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_plan_takes_the_vmis_features_with_require_as_the_default() -> None:
    """An unset policy is libvirt's require (KubeVirt's default)."""
    spec = {
        "domain": {"cpu": {"features": [{"name": "pcid"}, {"name": "vme", "policy": "disable"}]}}
    }
    vmi = VirtualMachineInstance.from_dict({"metadata": {"name": "v"}, "spec": spec})
    assert cpu_features(vmi) == (("pcid", "require"), ("vme", "disable"))
