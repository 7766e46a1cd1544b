"""The domain's network devices from a VMI: the NICs virt-handler wired (a tap each, or
user-mode masquerade where it wired none), their options, passt-bound interfaces, and the
q35 PCIe root ports the devices and hotplug spares need. Used by launcher/plan.py at start
and by launcher/nichotplug.py for hot-plugged NICs."""

from __future__ import annotations

from pathlib import Path

from launcher import nicxml
from launcher.domxml import DomainPlan, InterfacePlan, NetBackend
from launcher.nicxml import NicOptions
from launcher.passt import PasstInterface, guest_mac
from shared import nics, podnet
from shared.model import Interface, InterfaceMasquerade, VirtualMachineInstance


def interface_plans(
    vmi: VirtualMachineInstance, wiring: podnet.PodWiring | None
) -> tuple[InterfacePlan, ...]:
    """Interfaces the handler wired open its tap; an unwired masquerade is user-mode (a NIC
    hotplug's too: launcher/nichotplug.py)."""
    interfaces = vmi.spec.domain.devices.interfaces
    if not interfaces and not vmi.spec.networks:
        # KubeVirt auto-attaches the pod network with a masquerade interface.
        interfaces = (Interface(name="default", masquerade=InterfaceMasquerade()),)
    plans = []
    for iface in interfaces:
        if iface.uses_passt():
            continue  # QEMU reaches the launcher's passt (passt_interfaces)
        if nics.is_absent(iface):
            continue  # hot-unplugged (launcher/nichotplug.py)
        name = iface.name or ""
        wired = wiring.interface(name) if wiring is not None else None
        tapped = iface.bridge is not None or iface.binding is not None  # plugins: a tap
        backend = NetBackend.ETHERNET if tapped else NetBackend.USER
        plans.append(
            InterfacePlan(
                alias=name,
                backend=NetBackend.ETHERNET if wired is not None else backend,
                model=iface.model or "virtio",
                mac=iface.mac_address or (wired.mac if wired is not None else None),
                tap=wired.tap if wired is not None else None,
                options=_nic_options(vmi, iface, tap=wired is not None),
            )
        )
    return tuple(plans)


def _nic_options(vmi: VirtualMachineInstance, iface: Interface, *, tap: bool) -> NicOptions:
    """pciAddress, acpiIndex, bootOrder, link state; queues = vCPUs on a virtio tap NIC
    with networkInterfaceMultiqueue (KubeVirt's)."""
    queues = podnet.nic_queues(
        multiqueue=vmi.spec.domain.devices.network_interface_multiqueue,
        model=iface.model, vcpus=vmi.spec.domain.vcpus(),
    )  # fmt: skip
    return NicOptions(
        pci_address=iface.pci_address, acpi_index=iface.acpi_index,
        boot_order=iface.boot_order, link_down=iface.state == "down",
        queues=queues if queues > 1 and tap else None,
    )  # fmt: skip


def root_ports(plan: DomainPlan) -> int:
    """q35's pcie-root-port count: one per PCIe device the domain starts with (virtio
    disks, NICs not placed by pciAddress, the scsi, virtio-serial and USB controllers, the
    balloon, rng, virtio-mem and virtiofs) and KubeVirt's spares; none on other machines."""
    if "q35" not in plan.machine:
        return 0
    cold = sum(1 for d in plan.disks if d.bus == "virtio")
    cold += sum(1 for i in plan.interfaces if not i.options.pci_address)
    cold += 4 + int(plan.rng) + int(plan.memory_hotplug is not None) + len(plan.filesystems)
    if not plan.extras.hotplug:  # disableHotplug: no spares
        return cold
    return nicxml.root_ports(cold_devices=cold, memory_kib=plan.memory_kib)


def passt_interfaces(
    vmi: VirtualMachineInstance, *, socket_dir: Path, keep_addresses: bool = False
) -> tuple[PasstInterface, ...]:
    """The passt-bound interfaces: a socket each in `socket_dir` (QEMU's own directory).
    `keep_addresses` (a migration target): each passt gives the guest the addresses it
    already holds, the VMI's status.interfaces addresses (the first pod's IPs, one per
    family), not this pod's (KubeVirt 1.8's passt: the guest's address is kept across
    migrations)."""
    kept = {
        i.name: _one_per_family(i.ip_addresses or ((i.ip_address,) if i.ip_address else ()))
        for i in vmi.status.interfaces
        if keep_addresses and i.name
    }
    return tuple(
        PasstInterface(
            alias=i.name or "",
            socket=socket_dir / f"passt-{i.name}.sock",
            mac=i.mac_address or guest_mac(vmi.metadata.uid or "", i.name or ""),
            forwards=_passt_forwards(i),
            guest_addresses=kept.get(i.name or "", ()),
            own_mac=guest_mac(vmi.metadata.uid or "", f"{i.name}/passt"),
        )
        for i in vmi.spec.domain.devices.interfaces
        if i.uses_passt()
    )


def _one_per_family(addresses: tuple[str, ...]) -> tuple[str, ...]:
    """The first IPv4 and the first IPv6 address of `addresses`, in their order."""
    seen: dict[bool, str] = {}
    for a in addresses:
        seen.setdefault(":" in a, a)
    return tuple(seen.values())


def _passt_forwards(iface: Interface) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Every TCP and UDP port, or only interfaces[].ports (KubeVirt's passt binding)."""
    if not iface.ports:
        return (("tcp", ()), ("udp", ()))
    out = []
    for proto in ("tcp", "udp"):
        ports = tuple(p.port for p in iface.ports if (p.protocol or "TCP").lower() == proto)
        if ports:
            out.append((proto, ports))
    return tuple(out)
