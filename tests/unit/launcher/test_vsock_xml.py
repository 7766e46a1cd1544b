"""autoattachVSOCK in the domain XML: <vsock model='virtio'> with the CID the handler
wrote in status.VSOCKCID (virtio-transitional under useVirtioTransitional); without a CID
the start is refused naming the field; libvirt's schema accepts it."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher.domxml import build
from launcher.errors import InvalidSpec
from launcher.guestplan import guest_extras
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN


def _vmi(devices: dict[str, Any], cid: int | None) -> VirtualMachineInstance:
    status = {} if cid is None else {"VSOCKCID": cid}
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "namespace": "default"},
        "spec": {"domain": {"devices": devices}},
        "status": status,
    })  # fmt: skip


def _vsock(devices: dict[str, Any], cid: int | None) -> ET.Element | None:
    plan = dataclasses.replace(PLAN, extras=guest_extras(_vmi(devices, cid)))
    return ET.fromstring(build(plan)).find("devices/vsock")


def test_the_vsock_device_carries_the_handlers_cid(tmp_path: Path) -> None:
    """CID 7 in the status: <vsock model='virtio'><cid auto='no' address='7'/>; valid."""
    vsock = _vsock({"autoattachVSOCK": True}, 7)
    assert vsock is not None and vsock.get("model") == "virtio"
    assert [c.attrib for c in vsock] == [{"auto": "no", "address": "7"}]
    plan = dataclasses.replace(PLAN, extras=guest_extras(_vmi({"autoattachVSOCK": True}, 7)))
    path = tmp_path / "domain.xml"
    path.write_text(build(plan))
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_transitional_vsock() -> None:
    """useVirtioTransitional: the vsock device is virtio-transitional too."""
    vsock = _vsock({"autoattachVSOCK": True, "useVirtioTransitional": True}, 3)
    assert vsock is not None and vsock.get("model") == "virtio-transitional"


def test_no_device_without_autoattach_vsock() -> None:
    """autoattachVSOCK unset or false: no <vsock>, whatever the status says."""
    assert _vsock({}, None) is None
    assert _vsock({"autoattachVSOCK": False}, 5) is None


@pytest.mark.parametrize("cid", [None, 2], ids=["no-cid", "reserved-cid"])
def test_a_missing_or_reserved_cid_refuses_the_start(cid: int | None) -> None:
    """No CID from the handler (or one of the reserved 0-2): InvalidSpec naming the field."""
    with pytest.raises(InvalidSpec, match=r"spec\.domain\.devices\.autoattachVSOCK"):
        guest_extras(_vmi({"autoattachVSOCK": True}, cid))
