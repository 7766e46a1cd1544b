"""Links changed on the running domain (launcher/linkstate.py) and the DHCP extras of
dhcpOptions (launcher/dhcp.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from launcher import dhcp
from launcher.domxml import build
from launcher.linkstate import LinkStates
from launcher.podnet import vmi_extras
from shared.model import VirtualMachineInstance
from shared.model.devopts import DHCPOptions
from shared.podnet import nic_queues
from shared.wire.links import LinkStatesArgs
from tests.unit.launcher.test_devopts_xml import OPTIONS_PLAN
from tests.unit.launcher.test_dhcp import _lease, _request


class _Virt:
    def __init__(self) -> None:
        self.updates: list[str] = []

    async def xml(self, name: str) -> str:
        return build(OPTIONS_PLAN)

    async def update_device(self, name: str, xml: str) -> None:
        self.updates.append(xml)


async def test_only_differing_links_are_updated() -> None:
    """default is down in the domain: asked up, it is updated; second is already up."""
    virt = _Virt()
    links = LinkStates(virt=virt, domain=lambda: "ns_v")
    changed = await links.apply(LinkStatesArgs(links={"default": True, "second": True}))
    assert changed == ["default"]
    (xml,) = virt.updates
    assert ET.fromstring(xml).find("link").get("state") == "up"  # type: ignore[union-attr]
    assert await links.apply(LinkStatesArgs(links={"default": False})) == []


def test_dhcp_reply_carries_the_dhcp_options() -> None:
    """TFTP server (66), boot file (67), NTP servers (42) and private options in the OFFER."""
    extras = dhcp.extras_of(DHCPOptions.from_dict({
        "bootFileName": "pxelinux.0", "tftpServerName": "tftp.example",
        "ntpServers": ["192.0.2.1", "192.0.2.2"],
        "privateOptions": [{"option": 240, "value": "hello"}],
    }))  # fmt: skip
    out = dhcp.reply(_request(1), _lease(), extras)
    assert out is not None
    opts = dhcp._options(out[240:])
    assert opts[66] == b"tftp.example" and opts[67] == b"pxelinux.0"
    assert opts[42] == bytes([192, 0, 2, 1, 192, 0, 2, 2])
    assert opts[240] == b"hello"
    plain = dhcp.reply(_request(1), _lease())
    assert plain is not None
    assert not {42, 66, 67, 240} & set(dhcp._options(plain[240:]))


def test_nic_queues_follow_kubevirt() -> None:
    """networkInterfaceMultiqueue: vCPUs queues on a virtio NIC with more than one vCPU."""
    assert nic_queues(multiqueue=True, model=None, vcpus=4) == 4
    assert nic_queues(multiqueue=True, model="e1000e", vcpus=4) == 1
    assert nic_queues(multiqueue=None, model="virtio", vcpus=4) == 1
    assert nic_queues(multiqueue=True, model="virtio", vcpus=1) == 1


def test_vmi_extras_read_the_interfaces_dhcp_options() -> None:
    """The DHCP responder of an interface takes its dhcpOptions from the VMI the launcher
    holds at reply time; before a VMI, or for an interface without any, none."""
    vmi = VirtualMachineInstance.from_dict({"metadata": {"name": "v"}, "spec": {"domain": {
        "devices": {"interfaces": [
            {"name": "default", "masquerade": {}, "dhcpOptions": {"bootFileName": "f"}},
            {"name": "other", "bridge": {}},
        ]}}}})  # fmt: skip
    held: list[VirtualMachineInstance | None] = [None]
    of = vmi_extras(lambda: held[0])
    assert of("default") == dhcp.Extras()
    held[0] = vmi
    assert of("default") == dhcp.Extras(boot_file="f")
    assert of("other") == dhcp.Extras()
