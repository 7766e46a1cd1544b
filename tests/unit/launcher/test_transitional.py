"""useVirtioTransitional and disableHotplug in the domain XML: every virtio device whose
libvirt element has a transitional model takes it (disks, NICs, the scsi and
virtio-serial controllers, balloon, rng; not input devices, which libvirt refuses);
disableHotplug leaves q35 no spare root ports. libvirt's schema accepts the result."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from launcher.domxml import DomainPlan, build
from launcher.guestplan import guest_extras
from launcher.nicplan import root_ports
from tests.unit.launcher.test_domxml import PLAN
from tests.unit.launcher.test_guestxml import _vmi

KEYBOARD = {"name": "k", "type": "keyboard", "bus": "virtio"}


def _plan(devices: dict[str, Any]) -> DomainPlan:
    extras = guest_extras(_vmi({"devices": devices}))
    return dataclasses.replace(PLAN, rng=True, extras=extras)


def _models(root: ET.Element) -> dict[str, list[str | None]]:
    devices = root.find("devices")
    assert devices is not None
    return {
        "disk": [d.get("model") for d in devices.iterfind("disk[target]")
                 if d.find("target").get("bus") == "virtio"],  # type: ignore[union-attr]
        "interface": [m.get("type") for m in devices.iterfind("interface/model")],
        "scsi": [c.get("model") for c in devices.iterfind("controller[@type='scsi']")],
        "serial": [c.get("model") for c in devices.iterfind("controller[@type='virtio-serial']")],
        "balloon": [b.get("model") for b in devices.iterfind("memballoon")],
        "rng": [r.get("model") for r in devices.iterfind("rng")],
        "input": [i.get("model") for i in devices.iterfind("input[@bus='virtio']")],
    }  # fmt: skip


def test_transitional_models_on_every_virtio_device(tmp_path: Path) -> None:
    """useVirtioTransitional: virtio-transitional on virtio disks, the NIC, the scsi
    controller, an explicit virtio-serial controller, balloon and rng; the virtio keyboard
    keeps no model; the XML passes virt-xml-validate."""
    xml = build(_plan({"useVirtioTransitional": True, "inputs": [KEYBOARD]}))
    t = "virtio-transitional"
    assert _models(ET.fromstring(xml)) == {
        "disk": [t, t], "interface": [t], "scsi": [t], "serial": [t],
        "balloon": [t], "rng": [t], "input": [None],
    }  # fmt: skip
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_without_it_the_models_are_plain_virtio() -> None:
    """Unset (or false): the models stay as they were, no virtio-serial controller."""
    for devices in ({}, {"useVirtioTransitional": False}):
        models = _models(ET.fromstring(build(_plan(devices))))
        assert models["disk"] == [None, None]
        assert models["interface"] == ["virtio"]
        assert (models["scsi"], models["serial"]) == (["virtio-scsi"], [])


def test_disable_hotplug_leaves_no_spare_root_ports() -> None:
    """disableHotplug: q35 gets one root port per PCIe device it starts with; without it,
    KubeVirt's spares come on top."""
    spare = root_ports(_plan({}))
    exact = root_ports(_plan({"disableHotplug": True}))
    # two virtio disks, one NIC, scsi/serial/USB/balloon (4), rng
    assert exact == 2 + 1 + 4 + 1
    assert spare > exact
