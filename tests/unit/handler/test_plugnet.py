"""virt-handler's part of network binding plugins: which interfaces it wires for a plugin,
managedTap's bridge and tap (the pod interface's addresses removed, its MAC the guest's),
a `tap` plugin's device found, LiveMigratable by the plugin's `migration`, and
link-refresh once per migration to this node (handler/plugnet.py, handler/linkrefresh.py)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from handler import netns, plugnet
from handler.errors import SyncError
from handler.linkrefresh import LinkRefresh
from handler.netns import Launcher, WiringError
from handler.netwire import Target
from handler.podnet import PodNetworks, contract_path
from handler.status import live_migratable
from shared.model import VirtualMachineInstance
from shared.model.binding import DomainAttachmentType
from shared.netbinding import BindingPlugin
from shared.podnet import Binding
from shared.wire.launcher_api import Method

MANAGED = BindingPlugin(name="l2", attachment=DomainAttachmentType.MANAGED_TAP)
TAP = BindingPlugin(name="mvt", attachment=DomainAttachmentType.TAP)
REFRESH = BindingPlugin(
    name="l2r", attachment=DomainAttachmentType.MANAGED_TAP, migratable=True, link_refresh=True
)
PLUGINS = (MANAGED, TAP, REFRESH)


def _vmi(*names: str, status: dict[str, Any] | None = None) -> VirtualMachineInstance:
    ifaces = [{"name": "pod", "binding": {"name": names[0]}}]
    nets: list[dict[str, Any]] = [{"name": "pod", "pod": {}}]
    for i, name in enumerate(names[1:]):
        ifaces.append({"name": f"sec{i}", "binding": {"name": name}})
        nets.append({"name": f"sec{i}", "multus": {"networkName": "nad"}})
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "uid": "u"},
        "spec": {"domain": {"devices": {"interfaces": ifaces}}, "networks": nets},
        "status": status or {},
    })  # fmt: skip


def test_plugin_targets_name_their_pod_interface() -> None:
    """A managedTap plugin on the pod network binds eth0, a tap plugin on a multus network
    its pod<hash>; passt and unregistered plugins are not the handler's to wire."""
    targets = plugnet.plugin_targets(_vmi("l2", "mvt", "passt", "nosuch"), PLUGINS)
    assert [(t.index, t.binding, t.pod_interface[:3]) for t in targets] == [
        (0, Binding.MANAGED_TAP, "eth"), (1, Binding.TAP, "pod"),
    ]  # fmt: skip


class FakeNetns:
    """netns.ip_json answers from `links`; netns.batch records its commands."""

    def __init__(self, links: list[dict[str, Any]]) -> None:
        self.links = links
        self.batches: list[list[list[str]]] = []

    async def ip_json(self, pid: int, *argv: str) -> list[dict[str, Any]]:
        return self.links

    async def batch(self, pid: int, *, ip: Any, **_: Any) -> None:
        self.batches.append([list(c) for c in ip])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNetns:
    eth0 = {"ifname": "eth0", "mtu": 1400, "address": "0a:58:0a:f4:00:05",
            "addr_info": [{"family": "inet", "local": "10.244.0.5", "prefixlen": 24,
                           "scope": "global"}]}  # fmt: skip
    f = FakeNetns([eth0])
    monkeypatch.setattr(netns, "ip_json", f.ip_json)
    monkeypatch.setattr(netns, "batch", f.batch)
    return f


async def test_managed_tap_bridges_the_pod_interface_without_addresses(fake: FakeNetns) -> None:
    """Bridge k6t-eth0 and the launcher user's tap0 on it; eth0's address removed, eth0 on
    the bridge with a new MAC; the guest takes eth0's MAC and gets no DHCP of ours."""
    target = Target(index=0, name="pod", binding=Binding.MANAGED_TAP)
    wired = await plugnet.managed_tap(Launcher(pid=1, uid=107), target)
    (cmds,) = fake.batches
    assert ["tuntap", "add", "dev", "tap0", "mode", "tap", "user", "107", "vnet_hdr"] in cmds
    assert ["addr", "del", "10.244.0.5/24", "dev", "eth0"] in cmds
    assert ["link", "set", "eth0", "master", "k6t-eth0", "up"] in cmds
    assert (wired.tap, wired.bridge, wired.mac, wired.mtu) == (
        "tap0", "k6t-eth0", "0a:58:0a:f4:00:05", 1400)  # fmt: skip
    assert wired.guest_ip == "" and wired.binding is Binding.MANAGED_TAP


async def test_a_tap_plugin_opens_the_device_its_cni_made(fake: FakeNetns) -> None:
    """`tap`: tap0 when the CNI made it, else the pod interface itself, with its MAC (the
    spec's macAddress first); nothing is changed in the pod; no device at all is an error."""
    target = Target(index=0, name="pod", binding=Binding.TAP)
    wired = await plugnet.existing_tap(Launcher(pid=1, uid=107), target)
    assert (wired.tap, wired.mac, wired.bridge) == ("eth0", "0a:58:0a:f4:00:05", "")
    fake.links.append({"ifname": "tap0", "address": "02:00:00:00:00:09"})
    mac = "02:00:00:00:00:01"
    wired = await plugnet.existing_tap(Launcher(pid=1, uid=107), Target(
        index=0, name="pod", binding=Binding.TAP, mac=mac))  # fmt: skip
    assert (wired.tap, wired.mac) == ("tap0", mac)
    assert fake.batches == []
    fake.links.clear()
    with pytest.raises(WiringError, match="made no"):
        await plugnet.existing_tap(Launcher(pid=1, uid=107), target)


def test_a_plugin_without_migration_pins_the_vmi() -> None:
    """On the pod network, a plugin the CR gives no `migration` makes the VMI
    LiveMigratable=False (InterfaceNotLiveMigratable); with `migration` it migrates."""
    stays = live_migratable(_vmi("l2"), plugins=PLUGINS)
    assert (stays.status, stays.reason) == ("False", "InterfaceNotLiveMigratable")
    assert live_migratable(_vmi("l2r"), plugins=PLUGINS).status == "True"


class FakeLauncher:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def call(self, method: Method, args: dict[str, Any]) -> list[str]:
        assert method is Method.SET_LINK_STATES
        self.calls.append(args)
        return list(args["links"])


async def test_link_refresh_once_per_migration_to_this_node() -> None:
    """After a completed migration to this node, each link-refresh interface goes down,
    then up; not again for the same migration, not for another node's or a failed one."""
    state = {"completed": True, "targetNode": "n2", "migrationUid": "m1"}
    vmi = _vmi("l2r", "l2r", "l2", status={"phase": "Running", "migrationState": state})
    refresh = LinkRefresh(node="n2", plugins=lambda: PLUGINS, pause=0)
    launcher = FakeLauncher()
    await refresh.apply(launcher, vmi)  # type: ignore[arg-type]
    down, up = launcher.calls
    assert down == {"links": {"pod": False, "sec0": False}}
    assert up == {"links": {"pod": True, "sec0": True}}
    await refresh.apply(launcher, vmi)  # type: ignore[arg-type]
    assert len(launcher.calls) == 2
    assert LinkRefresh(node="n1", plugins=lambda: PLUGINS).wanted(vmi) == ()
    failed = _vmi("l2r", status={"phase": "Running", "migrationState": {**state, "failed": True}})
    assert LinkRefresh(node="n2", plugins=lambda: PLUGINS).wanted(failed) == ()


async def test_a_node_that_cannot_wire_names_the_plugin(tmp_path: Path) -> None:
    """Where the node cannot wire (the launcher shares the handler's namespace), a managedTap
    interface has no user-mode fallback: the sync fails naming the interface and the plugin,
    even beside a masquerade pod interface."""
    private = contract_path(tmp_path, "pod-1").parent
    private.mkdir(parents=True)
    vmi = VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "uid": "u"},
        "spec": {"domain": {"devices": {"interfaces": [
            {"name": "default", "masquerade": {}}, {"name": "sec", "binding": {"name": "l2"}}]}},
            "networks": [{"name": "default", "pod": {}},
                         {"name": "sec", "multus": {"networkName": "nad"}}]},
    })  # fmt: skip
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen()
    with server, pytest.raises(SyncError, match=r"interface sec: .* managedTap binding plugin"):
        await PodNetworks(pods_dir=tmp_path, plugins=lambda: PLUGINS).ensure(
            vmi, pod_uid="pod-1", socket=sock_path
        )
