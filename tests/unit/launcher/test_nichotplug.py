"""NIC hotplug on the running domain (launcher/nichotplug.py): a NIC this pod was wired
for and the domain lacks is attached with its tap and MAC; one marked absent is detached
and reported gone once the guest let go; an unwired one waits (the source pod of a
hotplug migration)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from launcher.nichotplug import NicConfig, NicHotplug
from shared import podnet
from shared.podnet import Binding, PodWiring, WiredInterface
from shared.wire.nics import InterfacesReply, SyncInterfacesArgs

DOMAIN = """<domain><devices>
<interface type='ethernet'><target dev='tap0' managed='no'/><alias name='ua-default'/></interface>
</devices></domain>"""


class _Virt:
    """A domain whose interfaces attach and detach take effect at once (or never)."""

    def __init__(self, *, guest_lets_go: bool = True) -> None:
        self.root = ET.fromstring(DOMAIN)
        self.attached: list[str] = []
        self._lets_go = guest_lets_go

    async def xml(self, name: str) -> str:
        return ET.tostring(self.root, encoding="unicode")

    async def attach_device(self, name: str, xml: str) -> None:
        self.attached.append(xml)
        self.root.find("devices").append(ET.fromstring(xml))  # type: ignore[union-attr]

    async def detach_device(self, name: str, xml: str) -> None:
        alias = ET.fromstring(xml).find("alias").get("name")  # type: ignore[union-attr]
        devices = self.root.find("devices")
        assert devices is not None
        for iface in devices.findall("interface"):
            if self._lets_go and iface.find("alias").get("name") == alias:  # type: ignore[union-attr]
                devices.remove(iface)


def _vmi(hot_state: str | None = None) -> dict[str, Any]:
    hot = {"name": "hot", "bridge": {}} | ({"state": hot_state} if hot_state else {})
    return {
        "metadata": {"name": "v", "namespace": "ns", "uid": "u1"},
        "spec": {
            "domain": {"devices": {"interfaces": [{"name": "default", "masquerade": {}}, hot]},
                       "memory": {"guest": "64Mi"}},
            "networks": [{"name": "default", "pod": {}},
                         {"name": "hot", "multus": {"networkName": "nad"}}],
        },
    }  # fmt: skip


def _wired(path: Path, *names: str) -> Path:
    podnet.write(path, PodWiring(interfaces=tuple(
        WiredInterface(name=n, binding=Binding.BRIDGE, tap=f"tap{i + 1}", bridge=f"k6t-{n}",
                       guest_ip="", prefix=0, server_ip="", gateway=None,
                       mac="02:00:00:00:00:0a")
        for i, n in enumerate(names)
    )))  # fmt: skip
    return path


def _nics(virt: _Virt, network_file: Path) -> NicHotplug:
    config = NicConfig(network_file=network_file, detach_wait=0.05, poll=0.01)
    return NicHotplug(virt=virt, domain=lambda: "ns_v", config=config)


async def test_a_wired_nic_is_attached_with_its_tap_and_mac(tmp_path: Path) -> None:
    """hot is wired (tap1) and not in the domain: attached as an ethernet interface on
    tap1 with the wiring's MAC and alias ua-hot; asking again attaches nothing."""
    virt = _Virt()
    nics = _nics(virt, _wired(tmp_path / "net.json", "hot"))
    reply = await nics.sync(SyncInterfacesArgs(vmi=_vmi()))
    assert reply == InterfacesReply(attached=("hot",), present=("default", "hot"))
    (xml,) = virt.attached
    el = ET.fromstring(xml)
    assert el.get("type") == "ethernet"
    assert el.find("target").get("dev") == "tap1"  # type: ignore[union-attr]
    assert el.find("mac").get("address") == "02:00:00:00:00:0a"  # type: ignore[union-attr]
    again = await nics.sync(SyncInterfacesArgs(vmi=_vmi()))
    assert again.attached == () and len(virt.attached) == 1


async def test_an_unwired_nic_is_not_attached(tmp_path: Path) -> None:
    """This pod was made before the hotplug (no wiring for hot): nothing is attached."""
    virt = _Virt()
    reply = await _nics(virt, _wired(tmp_path / "net.json")).sync(SyncInterfacesArgs(vmi=_vmi()))
    assert reply == InterfacesReply(present=("default",)) and virt.attached == []


async def test_an_absent_nic_is_detached_and_reported_gone_once_released(tmp_path: Path) -> None:
    """hot absent and in the domain: detached; present no longer names it. A guest that
    does not let go leaves it present after the wait."""
    for lets_go, present in ((True, ("default",)), (False, ("default", "hot"))):
        virt = _Virt(guest_lets_go=lets_go)
        nics = _nics(virt, _wired(tmp_path / "net.json", "hot"))
        await nics.sync(SyncInterfacesArgs(vmi=_vmi()))
        reply = await nics.sync(SyncInterfacesArgs(vmi=_vmi("absent")))
        assert reply == InterfacesReply(detached=("hot",), present=present)
