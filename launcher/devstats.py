"""Domain stats under the VMI's own names, and the guest agent's view of the interfaces.

libvirt reports disks by target device (vda) and interfaces by host device (vnet0);
KubeVirt's metrics label them with the VMI's disk and interface names. The domain XML
carries both: every device has the alias `ua-<VMI name>` (launcher.domxml). Interfaces
on QEMU's user network (our masquerade) have no host device, so libvirt has no counters
for them: their counters come from the guest agent (guest-network-get-interfaces), matched
by MAC address, as do every interface's guest-side name and addresses.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launcher.passt import aliases_by_mac as passt_aliases
from shared.wire.stats import DomainStats, NetStats

ALIAS_PREFIX = "ua-"
_AGENT_COUNTERS = {
    "rx_bytes": "rx-bytes",
    "rx_packets": "rx-packets",
    "rx_errors": "rx-errs",
    "rx_dropped": "rx-dropped",
    "tx_bytes": "tx-bytes",
    "tx_packets": "tx-packets",
    "tx_errors": "tx-errs",
    "tx_dropped": "tx-dropped",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceNames:
    """libvirt's device names → the VMI's names, read from the live domain XML."""

    disks: Mapping[str, str]  # target dev → disk name
    nics: Mapping[str, str]  # host device → interface name
    macs: Mapping[str, str]  # MAC (lower case) → interface name
    user_nics: frozenset[str]  # interfaces on QEMU's user network


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestInterface:
    """One interface as the guest agent sees it."""

    name: str  # the guest's own name, e.g. eth0
    mac: str
    ip_addresses: tuple[str, ...]
    stats: NetStats | None


def device_names(xml: str) -> DeviceNames:
    """The alias map of a domain XML; devices without our alias keep libvirt's names."""
    root = ET.fromstring(xml)
    disks: dict[str, str] = {}
    for disk in root.iterfind("devices/disk"):
        alias, target = _alias(disk), disk.find("target")
        if alias and target is not None and target.get("dev"):
            disks[str(target.get("dev"))] = alias
    nics, macs, user = {}, {}, set()
    for iface in root.iterfind("devices/interface"):
        alias = _alias(iface)
        if not alias:
            continue
        target, mac = iface.find("target"), iface.find("mac")
        if target is not None and target.get("dev"):
            nics[str(target.get("dev"))] = alias
        if mac is not None and mac.get("address"):
            macs[str(mac.get("address")).lower()] = alias
        if iface.get("type") == "user":
            user.add(alias)
    passt = passt_aliases(root)  # no libvirt interface: counters from the guest agent too
    macs.update(passt)
    user.update(passt.values())
    return DeviceNames(disks=disks, nics=nics, macs=macs, user_nics=frozenset(user))


def _alias(el: ET.Element) -> str:
    alias = el.find("alias")
    name = alias.get("name", "") if alias is not None else ""
    return name.removeprefix(ALIAS_PREFIX) if name.startswith(ALIAS_PREFIX) else ""


def guest_interfaces(raw: Any) -> tuple[GuestInterface, ...]:
    """guest-network-get-interfaces' reply, loopback left out."""
    out = []
    for item in raw if isinstance(raw, list) else []:
        mac = str(item.get("hardware-address", "")).lower()
        if not mac or mac == "00:00:00:00:00:00":
            continue
        ips = tuple(
            str(a["ip-address"]) for a in item.get("ip-addresses") or [] if a.get("ip-address")
        )
        counters = item.get("statistics")
        stats = None
        if isinstance(counters, Mapping):
            values = {
                ours: int(counters.get(theirs, 0)) for ours, theirs in _AGENT_COUNTERS.items()
            }
            stats = NetStats(name=str(item.get("name", "")), **values)
        out.append(
            GuestInterface(name=str(item.get("name", "")), mac=mac, ip_addresses=ips, stats=stats)
        )
    return tuple(out)


def named(
    stats: DomainStats, names: DeviceNames, guest: Sequence[GuestInterface] = ()
) -> DomainStats:
    """`stats` with the VMI's disk and interface names; user-network interfaces' counters
    from the guest agent (matched by MAC), when it answered."""
    block = tuple(dataclasses.replace(b, name=names.disks.get(b.name, b.name)) for b in stats.block)
    net = [dataclasses.replace(n, name=names.nics.get(n.name, n.name)) for n in stats.net]
    for iface in guest:
        vmi_name = names.macs.get(iface.mac)
        if vmi_name in names.user_nics and iface.stats is not None:
            net.append(dataclasses.replace(iface.stats, name=vmi_name))
    return dataclasses.replace(stats, block=block, net=tuple(net))
