"""Pod network setup, KubeVirt's virt-handler part: wire the launcher pod's network
namespace before the launcher defines its domain (or prepares a migration target), then
write the contract file the launcher reads (shared/podnet.py).

Once per launcher pod: the file's presence means done. Masquerade falls back to QEMU's
user-mode network only where this node cannot wire at all (`CannotWire`: logged as
`pod_network_user_mode` and written into the file, which the launcher logs too); a bridge
binding has no such fallback, its VMI's Synchronized condition says why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from handler import netwire, plugnet, podowner
from handler.errors import SyncError, SyncReason
from handler.netns import CannotWire, Launcher, WiringError, launcher_process
from handler.netwire import Target
from shared import multus, nics, podlayout, podnet
from shared.model import Interface, InterfaceMasquerade, VirtualMachineInstance
from shared.netbinding import BindingPlugin
from shared.podnet import Binding, PodWiring, nic_queues

log = structlog.get_logger("handler.podnet")

DEFAULT_INTERFACE = "default"  # the pod network KubeVirt auto-attaches, masquerade-bound


def _multi_queue(vmi: VirtualMachineInstance, iface: Interface) -> bool:
    devices = vmi.spec.domain.devices
    queues = nic_queues(
        multiqueue=devices.network_interface_multiqueue, model=iface.model,
        vcpus=vmi.spec.domain.vcpus(),
    )  # fmt: skip
    return queues > 1


def pod_target(vmi: VirtualMachineInstance) -> Target | None:
    """The VMI's interface on the pod network, if it binds one way the handler wires."""
    interfaces = vmi.spec.domain.devices.interfaces
    if not interfaces and not vmi.spec.networks:
        default = Interface(name=DEFAULT_INTERFACE, masquerade=InterfaceMasquerade())
        return Target(
            index=0, name=DEFAULT_INTERFACE, binding=Binding.MASQUERADE,
            multi_queue=_multi_queue(vmi, default),
        )  # fmt: skip
    for index, iface in enumerate(interfaces):
        net = vmi.spec.network(iface.name or "")
        if net is None or not net.primary:
            continue
        name, mac = iface.name or "", iface.mac_address
        if iface.bridge is not None:
            return Target(
                index=index, name=name, binding=Binding.BRIDGE, mac=mac,
                multi_queue=_multi_queue(vmi, iface),
            )  # fmt: skip
        if iface.masquerade is not None:
            ports = iface.ports
            tcp = tuple(p.port for p in ports if (p.protocol or "TCP").upper() == "TCP")
            udp = tuple(p.port for p in ports if (p.protocol or "").upper() == "UDP")
            return Target(
                index=index,
                name=name,
                binding=Binding.MASQUERADE,
                tcp_ports=tcp,
                udp_ports=udp,
                listed=bool(ports),
                mac=mac,
                multi_queue=_multi_queue(vmi, iface),
                guest_range=podnet.guest_range(net.pod.vm_network_cidr if net.pod else None),
                guest_range6=podnet.guest_range6(net.pod.vm_ipv6_network_cidr if net.pod else None),
            )
    return None


def secondary_targets(vmi: VirtualMachineInstance) -> tuple[Target, ...]:
    """The VMI's interfaces on multus networks (bridge binding), each on the pod interface
    multus made for it (shared/multus.py)."""
    found = []
    for index, iface in enumerate(vmi.spec.domain.devices.interfaces):
        net = vmi.spec.network(iface.name or "")
        secondary = net is not None and net.multus is not None and not net.primary
        if net is None or not secondary or iface.bridge is None or not net.name:
            continue
        if nics.is_absent(iface):  # hot-unplugged: this pod was made without it
            continue
        found.append(
            Target(
                index=index,
                name=iface.name or "",
                binding=Binding.BRIDGE,
                mac=iface.mac_address,
                pod_interface=multus.pod_interface(net.name),
                multi_queue=_multi_queue(vmi, iface),
            )
        )
    return tuple(found)


def _unwirable(targets: Sequence[Target]) -> Target:
    """The first target with no user-mode fallback (all but masquerade)."""
    return next((t for t in targets if t.binding is not Binding.MASQUERADE), targets[0])


def _kind(target: Target) -> str:
    plugin = target.binding in (Binding.MANAGED_TAP, Binding.TAP)
    return f"{target.binding} binding plugin" if plugin else "bridge binding"


def contract_path(pods_dir: Path, pod_uid: str) -> Path:
    """The contract file of pod `pod_uid`, as seen from the node."""
    private = pods_dir / pod_uid / podlayout.EMPTY_DIRS / podlayout.PRIVATE_VOLUME
    return private / podnet.NETWORK_FILE


class PodNetworks:
    """Wires each launcher pod of this node once."""

    def __init__(
        self, *, pods_dir: Path, plugins: Callable[[], Sequence[BindingPlugin]] = tuple
    ) -> None:
        self._pods_dir = pods_dir
        self._plugins = plugins  # the KubeVirt CR's binding plugins, read live

    def plugins(self) -> tuple[BindingPlugin, ...]:
        """The binding plugins registered now."""
        return tuple(self._plugins())

    async def ensure(self, vmi: VirtualMachineInstance, *, pod_uid: str, socket: Path) -> None:
        """The pod wired and its contract written; SyncError when it cannot be."""
        path = contract_path(self._pods_dir, pod_uid)
        if path.exists() or not path.parent.is_dir():
            return  # done, or no kubelet pod layout here (the launcher then runs user-mode)
        with contextlib.suppress(CannotWire):  # a non-root launcher's device nodes: its own
            podowner.hand_over(launcher_process(socket), host_disks=podowner.host_disk_files(vmi))
        target = pod_target(vmi)
        secondary = (*secondary_targets(vmi), *plugnet.plugin_targets(vmi, self.plugins()))
        targets = (*((target,) if target is not None else ()), *secondary)
        try:
            launcher = launcher_process(socket) if targets else None
            wired = [await _wire(launcher, t) for t in targets if launcher is not None]
        except CannotWire as e:
            if target is None or target.binding is Binding.BRIDGE or secondary:
                first = _unwirable(targets)
                raise SyncError(
                    SyncReason.SYNC_FAILED,
                    f"interface {first.name}: this node cannot wire a {_kind(first)}: {e}",
                ) from e
            log.warning("pod_network_user_mode", interface=target.name, reason=str(e))
            podnet.write(path, PodWiring(user_mode_reason=str(e)))
            return
        podnet.write(path, PodWiring(interfaces=tuple(wired)))
        for w in wired:
            log.info(
                "pod_network_wired",
                interface=w.name,
                binding=str(w.binding),
                tap=w.tap,
                guest_ip=w.guest_ip,
            )


_WIRES = {
    Binding.MASQUERADE: netwire.masquerade,
    Binding.BRIDGE: netwire.bridge,
    Binding.MANAGED_TAP: plugnet.managed_tap,
    Binding.TAP: plugnet.existing_tap,
}


async def _wire(launcher: Launcher, target: Target) -> podnet.WiredInterface:
    wire = _WIRES[target.binding]
    try:
        return await wire(launcher, target)
    except CannotWire:
        raise
    except WiringError as e:
        raise SyncError(
            SyncReason.SYNC_FAILED, f"interface {target.name}: wiring the pod network: {e}"
        ) from e
