"""devices.downwardMetrics in the domain XML: a unix channel QEMU binds beside the agent's
socket, on the virtio-serial port org.github.vhostmd.1; none without the device; libvirt's
schema accepts it."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from launcher.domxml import build
from launcher.guestplan import guest_extras
from tests.unit.launcher.test_domxml import PLAN
from tests.unit.launcher.test_guestxml import _vmi


def _xml(devices: dict[str, object]) -> str:
    return build(dataclasses.replace(PLAN, extras=guest_extras(_vmi({"devices": devices}))))


def test_the_vhostmd_channel_sits_beside_the_agent_socket(tmp_path: Path) -> None:
    """downwardMetrics: {} → <channel type='unix'> bound at downwardmetrics.sock next to
    the agent's socket, target virtio org.github.vhostmd.1; the XML validates."""
    xml = _xml({"downwardMetrics": {}})
    channels = ET.fromstring(xml).findall("devices/channel")
    (vhostmd,) = [c for c in channels if c.find("target[@name='org.github.vhostmd.1']") is not None]
    source = vhostmd.find("source")
    assert source is not None and source.get("mode") == "bind"
    assert source.get("path") == str(PLAN.agent_socket.with_name("downwardmetrics.sock"))
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_no_channel_without_the_device() -> None:
    """No downwardMetrics: only the agent's channel."""
    names = [t.get("name") for t in ET.fromstring(_xml({})).iterfind("devices/channel/target")]
    assert names == ["org.qemu.guest_agent.0"]
