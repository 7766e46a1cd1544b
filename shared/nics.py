"""NIC hotplug and unplug (KubeVirt ≥ 1.4's way): which of a VMI's interfaces can come and
go live, and which the launcher pod and the domain should have now. One home for the rule
the controller, virt-handler and the launcher all apply (docs/network.md).

- hot-pluggable: a bridge-bound interface on a (non-default) multus network;
- present: every interface not marked `state: absent` (the pod and the domain keep it);
- absent: unplugged — detached from the domain in place, left out of the next launcher
  pod's multus annotation (a migration drops it from the pod).
"""

from __future__ import annotations

from shared.model import Interface, VirtualMachineInstance
from shared.model.devopts import LinkState
from shared.model.vmi import VMISpec


def is_absent(iface: Interface) -> bool:
    """`state: absent`: the interface is (being) unplugged."""
    return iface.state == LinkState.ABSENT


def hot_pluggable(spec: VMISpec, iface: Interface) -> bool:
    """A bridge-bound interface on a non-default multus network."""
    net = spec.network(iface.name or "")
    multus = net is not None and net.multus is not None and not net.multus.default
    return iface.bridge is not None and multus


def absent_networks(spec: VMISpec) -> frozenset[str]:
    """The networks whose interface is marked absent."""
    return frozenset(i.name or "" for i in spec.domain.devices.interfaces if is_absent(i))


def present(vmi: VirtualMachineInstance) -> tuple[Interface, ...]:
    """The interfaces the domain should have (not absent)."""
    return tuple(i for i in vmi.spec.domain.devices.interfaces if not is_absent(i))
