"""Network binding plugins' domain attachment types, virt-handler's part (shared/netbinding.py):
- `managedTap`: a bridge on the pod interface (eth0, or multus' `pod<hash>`) and the
  launcher user's tap on it, as for the bridge binding but with no address of ours: the pod
  interface's addresses leave it (the pod no longer answers for them), the guest takes its
  MAC and gets its addresses from the network itself (its DHCP, or static);
- `tap`: the binding's CNI made the device; the domain opens `tap<hash>` when it exists,
  else the pod interface itself (KubeVirt's rule), with that interface's MAC.
Each lands in the pod wiring contract like the core bindings (no DHCP: no `guest_ip`).
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from handler import netns
from handler.netns import Launcher, WiringError
from handler.netwire import Target, bridge_and_tap, random_mac
from shared import multus, nics, podnet
from shared.model import VirtualMachineInstance
from shared.model.binding import DomainAttachmentType
from shared.netbinding import BindingPlugin, attached
from shared.podnet import Binding, WiredInterface

log = structlog.get_logger("handler.plugnet")

PRIMARY_TAP = "tap0"  # KubeVirt's name of a `tap` plugin's device on the pod network
_BINDINGS = {
    DomainAttachmentType.MANAGED_TAP: Binding.MANAGED_TAP,
    DomainAttachmentType.TAP: Binding.TAP,
}


def plugin_targets(
    vmi: VirtualMachineInstance, plugins: Sequence[BindingPlugin]
) -> tuple[Target, ...]:
    """The interfaces bound by a plugin with a domainAttachmentType, on their pod interface."""
    found = []
    for index, iface, plugin in attached(plugins, vmi):
        net = vmi.spec.network(iface.name or "")
        if net is None or nics.is_absent(iface) or plugin.attachment is None:
            continue
        pod_if = podnet.POD_INTERFACE if net.primary else multus.pod_interface(net.name or "")
        found.append(
            Target(
                index=index, name=iface.name or "", binding=_BINDINGS[plugin.attachment],
                mac=iface.mac_address, pod_interface=pod_if,
            )
        )  # fmt: skip
    return tuple(found)


async def managed_tap(launcher: Launcher, target: Target) -> WiredInterface:
    """Bridge and tap on the pod interface; its addresses removed, its MAC the guest's."""
    pid, pod_if = launcher.pid, target.pod_interface
    links = {link["ifname"]: link for link in await netns.ip_json(pid, "addr", "show")}
    link = links.get(pod_if)
    if link is None:
        raise WiringError(f"the pod has no interface {pod_if}")
    mtu, pod_mac = int(link.get("mtu", 1500)), str(link["address"])
    br, tap = podnet.bridge_name(pod_if), podnet.tap_name(target.index)
    cmds = bridge_and_tap(links, bridge=br, tap=tap, mtu=mtu, uid=launcher.uid)
    for info in link.get("addr_info", ()):
        if info.get("scope", "global") == "global" and br not in links:
            cmds.append(["addr", "del", f"{info['local']}/{info['prefixlen']}", "dev", pod_if])
    if link.get("master") != br:
        cmds += [
            ["link", "set", pod_if, "down"],
            ["link", "set", pod_if, "address", random_mac()],
            ["link", "set", pod_if, "master", br, "up"],
        ]
    await netns.batch(pid, ip=cmds)
    log.info("managed_tap_wired", pod_interface=pod_if, tap=tap, mac=target.mac or pod_mac)
    return _wired(target, tap=tap, bridge=br, mac=target.mac or pod_mac, mtu=mtu)


async def existing_tap(launcher: Launcher, target: Target) -> WiredInterface:
    """The device the binding's CNI made: `tap<hash>` (tap0 on the pod network), else the
    pod interface (a tap or macvtap itself)."""
    links = {link["ifname"]: link for link in await netns.ip_json(launcher.pid, "link", "show")}
    primary = target.pod_interface == podnet.POD_INTERFACE
    tap = PRIMARY_TAP if primary else "tap" + target.pod_interface.removeprefix("pod")
    if tap not in links:
        tap = target.pod_interface
    link = links.get(tap)
    if link is None:
        raise WiringError(f"the binding's CNI made no {tap} in the pod")
    mac = target.mac or str(link.get("address") or "") or None
    return _wired(target, tap=tap, bridge="", mac=mac, mtu=int(link.get("mtu", 1500)))


def _wired(target: Target, *, tap: str, bridge: str, mac: str | None, mtu: int) -> WiredInterface:
    return WiredInterface(
        name=target.name, binding=target.binding, tap=tap, bridge=bridge, guest_ip="",
        prefix=0, server_ip="", gateway=None, mac=mac, mtu=mtu,
    )  # fmt: skip
