"""The handler's pod network setup: which interface is wired how, masquerade's NAT rules,
the routes handed to a bridge-bound guest, and the contract file's round trip."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from handler.errors import SyncError, SyncReason
from handler.netns import CannotWire, launcher_process
from handler.netwire import Target, guest_routes, masquerade_commands, nat_rules
from handler.podnet import PodNetworks, contract_path, pod_target
from shared import podnet
from shared.model import VirtualMachineInstance
from shared.podnet import Binding, PodWiring, Route, WiredInterface
from shared.wire.launcher_api import Method
from tests.unit.handler.fakes import vmi_dict
from tests.unit.handler.rig import Rig


def _vmi(interfaces: list[dict[str, Any]] | None = None) -> VirtualMachineInstance:
    spec: dict[str, Any] = {"domain": {"devices": {}}}
    if interfaces is not None:
        spec["domain"]["devices"]["interfaces"] = interfaces
        spec["networks"] = [{"name": i["name"], "pod": {}} for i in interfaces]
    return VirtualMachineInstance.from_dict({"metadata": {"name": "v", "uid": "u"}, "spec": spec})


def test_the_pod_interface_and_its_binding() -> None:
    """The auto-attached pod network is masquerade on tap0; a bridge binding keeps its MAC;
    listed ports split by protocol (TCP unless UDP)."""
    assert pod_target(_vmi()) == Target(index=0, name="default", binding=Binding.MASQUERADE)
    bridged = pod_target(_vmi([{"name": "p", "bridge": {}, "macAddress": "02:00:00:00:00:07"}]))
    assert bridged == Target(index=0, name="p", binding=Binding.BRIDGE, mac="02:00:00:00:00:07")
    masq = pod_target(_vmi([{"name": "p", "masquerade": {},
                             "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]))  # fmt: skip
    assert masq is not None and masq.listed
    assert (masq.tcp_ports, masq.udp_ports) == ((80,), (53,))


def test_nat_rules_lead_every_port_or_only_the_listed_ones() -> None:
    """Without ports every TCP and UDP port of the pod interface reaches the guest; with
    ports only those; what the guest sends out is masqueraded; the table is replaced."""
    every = nat_rules(Target(index=0, name="d", binding=Binding.MASQUERADE))
    assert 'iifname "eth0" meta l4proto tcp dnat to 10.0.2.2' in every
    assert 'iifname "eth0" meta l4proto udp dnat to 10.0.2.2' in every
    assert 'ip saddr 10.0.2.2 oifname "eth0" masquerade' in every
    assert every.startswith("table ip kubevirt_py_nat {}\ndelete table ip kubevirt_py_nat\n")
    listed = nat_rules(
        Target(index=0, name="d", binding=Binding.MASQUERADE, tcp_ports=(443, 80), listed=True)
    )
    assert 'iifname "eth0" tcp dport { 80, 443 } dnat to 10.0.2.2' in listed
    assert "udp" not in listed and "l4proto" not in listed


def test_vm_network_cidr_moves_the_guest_range() -> None:
    """networks[].pod.vmNetworkCIDR: the gateway is the range's first address, the guest
    its second (KubeVirt's), in the bridge's address and the NAT rules; unset: 10.0.2.0/24."""
    vmi = _vmi([{"name": "p", "masquerade": {}}])
    raw = vmi.to_dict()
    raw["spec"]["networks"][0]["pod"] = {"vmNetworkCIDR": "10.11.12.0/28"}
    target = pod_target(VirtualMachineInstance.from_dict(raw))
    assert target is not None
    assert target.guest_range == podnet.GuestRange(gateway="10.11.12.1", guest="10.11.12.2",
                                                   prefix=28)  # fmt: skip
    rules = nat_rules(target)
    assert "dnat to 10.11.12.2" in rules and "ip saddr 10.11.12.2 " in rules
    assert "10.0.2" not in rules
    links = {"eth0": {"mtu": 1400}}
    cmds = masquerade_commands(links, uid=107, target=target)
    assert cmds[-1] == ["addr", "replace", "10.11.12.1/28", "dev", "k6t-eth0"]
    default = pod_target(vmi)
    assert default is not None and default.guest_range == podnet.guest_range(None)
    assert podnet.guest_range(None) == podnet.GuestRange(gateway="10.0.2.1", guest="10.0.2.2",
                                                          prefix=24)  # fmt: skip


def test_guest_routes_from_the_pods_table() -> None:
    """The default gateway and gatewayed routes of the pod interface; on-link ones stay."""
    routes = [
        {"dst": "default", "gateway": "198.18.1.1", "dev": "eth0"},
        {"dst": "198.18.1.0/24", "dev": "eth0", "protocol": "kernel", "scope": "link"},
        {"dst": "198.19.0.0/16", "gateway": "198.18.1.254", "dev": "eth0"},
        {"dst": "default", "gateway": "198.18.9.1", "dev": "other"},
    ]
    assert guest_routes(routes, pod_if="eth0") == (
        "198.18.1.1", (Route(destination="198.19.0.0/16", gateway="198.18.1.254"),),
    )  # fmt: skip


def test_contract_round_trip(tmp_path: Path) -> None:
    """What the handler writes is what the launcher reads; absent reads as None."""
    path = tmp_path / podnet.NETWORK_FILE
    assert podnet.read(path) is None
    wired = WiredInterface(
        name="default", binding=Binding.BRIDGE, tap="tap0", bridge="k6t-eth0",
        guest_ip="198.18.1.5", prefix=24, server_ip="169.254.75.10", gateway="198.18.1.1",
        mac="0a:58:c6:12:01:05", routes=(Route(destination="198.19.0.0/16", gateway="x"),),
    )  # fmt: skip
    podnet.write(path, PodWiring(interfaces=(wired,)))
    back = podnet.read(path)
    assert back is not None and back.interface("default") == wired
    assert not list(tmp_path.glob(".*"))  # the temporary file was renamed


def test_a_launcher_in_the_handlers_namespace_cannot_be_wired(tmp_path: Path) -> None:
    """The peer of a socket in this very process shares its network namespace: CannotWire
    (a node without pod networks), never wiring the host's own namespace."""
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    with server, pytest.raises(CannotWire, match="shares virt-handler's network namespace"):
        launcher_process(path)


async def test_user_mode_fallback_is_written_for_masquerade(tmp_path: Path) -> None:
    """Where the node cannot wire, a masquerade pod's contract says so (user mode) and a
    second call leaves it alone."""
    private = contract_path(tmp_path, "pod-1").parent
    private.mkdir(parents=True)
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen()
    with server:
        nets = PodNetworks(pods_dir=tmp_path)
        await nets.ensure(_vmi(), pod_uid="pod-1", socket=sock_path)
        await nets.ensure(_vmi(), pod_uid="pod-1", socket=sock_path)
    wiring = podnet.read(contract_path(tmp_path, "pod-1"))
    assert (
        wiring is not None and "shares virt-handler's network namespace" in wiring.user_mode_reason
    )
    assert wiring.interfaces == ()


class _Wiring(PodNetworks):
    """Records when the pod was wired, relative to the launcher's calls; can fail."""

    def __init__(self, rig: Rig, key: str, *, fail: str = "") -> None:
        super().__init__(pods_dir=Path("/pods"))
        self.rig, self.key, self.fail = rig, key, fail
        self.calls_before: list[list[Method]] = []

    async def ensure(self, vmi: VirtualMachineInstance, *, pod_uid: str, socket: Path) -> None:
        self.calls_before.append(list(self.rig.launcher(self.key).calls))
        if self.fail:
            raise SyncError(SyncReason.SYNC_FAILED, self.fail)


async def test_the_pod_is_wired_before_the_launcher_defines_the_domain() -> None:
    """The reconcile loop wires the pod before its first Sync; a wiring failure sends no
    Sync and shows in the Synchronized condition."""
    rig = Rig()
    key = rig.put(vmi_dict())
    wiring = _Wiring(rig, key)
    rig.reconciler = rig.fresh_reconciler(podnet=wiring)
    await rig.process(key)
    assert wiring.calls_before == [[]]
    assert rig.launcher(key).calls == [Method.SYNC]

    failing_rig = Rig()
    key = failing_rig.put(vmi_dict())
    failing = _Wiring(failing_rig, key, fail="interface default: nft: no such table")
    failing_rig.reconciler = failing_rig.fresh_reconciler(podnet=failing)
    vmi = await failing_rig.process(key)
    assert failing_rig.launcher(key).calls == []
    synced = vmi.status.condition("Synchronized")
    assert synced is not None and synced.reason == "SyncFailed"
    assert "nft: no such table" in (synced.message or "")
