"""Domain stats under the VMI's names, and the guest agent's interfaces (launcher.devstats)."""

from __future__ import annotations

from launcher.devstats import device_names, guest_interfaces, named
from shared.wire.stats import BlockStats, DomainStats, NetStats

LIVE_XML = """
<domain type='qemu'><devices>
  <disk type='file' device='disk'><target dev='vda' bus='virtio'/><alias name='ua-containerdisk'/></disk>
  <disk type='file' device='cdrom'><target dev='sda' bus='sata'/><alias name='ua-cloudinitdisk'/></disk>
  <disk type='file' device='disk'><target dev='vdb' bus='virtio'/><alias name='virtio-disk1'/></disk>
  <interface type='user'><mac address='52:54:00:AA:BB:01'/><alias name='ua-default'/></interface>
  <interface type='ethernet'><mac address='52:54:00:aa:bb:02'/><target dev='tap7'/>
    <alias name='ua-br'/></interface>
</devices></domain>
"""
AGENT_REPLY = [
    {"name": "lo", "hardware-address": "00:00:00:00:00:00",
     "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}]},
    {"name": "eth0", "hardware-address": "52:54:00:aa:bb:01",
     "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "10.0.2.15", "prefix": 24},
                      {"ip-address-type": "ipv6", "ip-address": "fec0::5054:ff:feaa:bb01",
                       "prefix": 64}],
     "statistics": {"rx-bytes": 100, "rx-packets": 2, "rx-errs": 1, "rx-dropped": 3,
                    "tx-bytes": 50, "tx-packets": 1, "tx-errs": 0, "tx-dropped": 4}},
]  # fmt: skip


def test_device_names_come_from_the_aliases() -> None:
    """Disks by target dev, interfaces by host device and MAC; devices without our alias
    are left out (they keep libvirt's names)."""
    names = device_names(LIVE_XML)
    assert names.disks == {"vda": "containerdisk", "sda": "cloudinitdisk"}
    assert names.nics == {"tap7": "br"}
    assert names.macs == {"52:54:00:aa:bb:01": "default", "52:54:00:aa:bb:02": "br"}
    assert names.user_nics == frozenset({"default"})


def test_guest_interfaces_skip_loopback_and_keep_addresses_and_counters() -> None:
    """The agent's reply: name, MAC, every address, and the counters when reported."""
    (eth0,) = guest_interfaces(AGENT_REPLY)
    assert (eth0.name, eth0.mac) == ("eth0", "52:54:00:aa:bb:01")
    assert eth0.ip_addresses == ("10.0.2.15", "fec0::5054:ff:feaa:bb01")
    assert eth0.stats is not None and (eth0.stats.rx_bytes, eth0.stats.tx_dropped) == (100, 4)
    assert guest_interfaces(None) == ()


def test_stats_are_renamed_and_user_network_counters_come_from_the_agent() -> None:
    """Block and tap stats take the VMI's names; the user-network interface, which libvirt
    has no counters for, gets the agent's, matched by MAC."""
    raw = DomainStats(
        block=(BlockStats(name="vda", read_bytes=1), BlockStats(name="vdb", read_bytes=2)),
        net=(NetStats(name="tap7", rx_bytes=9),),
    )
    out = named(raw, device_names(LIVE_XML), guest_interfaces(AGENT_REPLY))
    assert [b.name for b in out.block] == ["containerdisk", "vdb"]
    assert {n.name: n.rx_bytes for n in out.net} == {"br": 9, "default": 100}
    assert named(raw, device_names(LIVE_XML)).net == (NetStats(name="br", rx_bytes=9),)
