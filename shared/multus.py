"""Multus secondary networks: the contract between the controller (which writes the launcher
pod's `k8s.v1.cni.cncf.io/networks` annotation) and virt-handler (which wires the pod
interface multus made into the guest).

Each `networks[].multus` network becomes one entry of the annotation, naming the
NetworkAttachmentDefinition and the pod interface multus must create: `pod<hash>`, the first
11 hex digits of the SHA-256 of the VMI network's name, as KubeVirt names them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from shared import launcherpod, nics
from shared.model import VirtualMachineInstance

NETWORKS_ANNOTATION = launcherpod.NETWORKS_ANNOTATION
NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"
DEFAULT_NETWORK_ANNOTATION = "v1.multus-cni.io/default-network"


def pod_interface(network: str) -> str:
    """The launcher pod's interface for the VMI network named `network` (≤ 14 characters)."""
    return "pod" + hashlib.sha256(network.encode()).hexdigest()[:11]


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One secondary network of a VMI: the NAD and the pod interface it lands on."""

    network: str  # spec.networks[].name
    nad_namespace: str
    nad_name: str
    pod_interface: str


def split_network_name(network_name: str, *, namespace: str) -> tuple[str, str]:
    """`name` or `namespace/name` → (namespace, name); a bare name is in `namespace`."""
    ns, sep, name = network_name.partition("/")
    return (ns, name) if sep else (namespace, ns)


def attachments(vmi: VirtualMachineInstance) -> tuple[Attachment, ...]:
    """The VMI's multus networks, in spec.networks order (not those of an interface marked
    absent: a hot-unplugged NIC's network leaves the next launcher pod, shared/nics.py)."""
    found = []
    gone = nics.absent_networks(vmi.spec)
    for net in vmi.spec.networks:
        if net.multus is None or not net.name or not net.multus.network_name:
            continue
        if net.multus.default or net.name in gone:  # eth0 (default_network_annotation); unplugged
            continue
        ns, name = split_network_name(
            net.multus.network_name, namespace=vmi.metadata.namespace or "default"
        )
        found.append(
            Attachment(
                network=net.name,
                nad_namespace=ns,
                nad_name=name,
                pod_interface=pod_interface(net.name),
            )
        )
    return tuple(found)


def default_network_annotation(vmi: VirtualMachineInstance) -> str | None:
    """The launcher pod's `v1.multus-cni.io/default-network` value (`namespace/name`) when a
    multus network is the pod's default (`multus.default`): multus makes the pod's eth0 from
    that NAD instead of the cluster network, and it is bound as the pod network is."""
    for net in vmi.spec.networks:
        if net.multus is not None and net.multus.default and net.multus.network_name:
            ns, name = split_network_name(
                net.multus.network_name, namespace=vmi.metadata.namespace or "default"
            )
            return f"{ns}/{name}"
    return None


def networks_annotation(vmi: VirtualMachineInstance) -> str | None:
    """The launcher pod's `k8s.v1.cni.cncf.io/networks` value, or None without multus."""
    found = attachments(vmi)
    if not found:
        return None
    entries = [
        {"name": a.nad_name, "namespace": a.nad_namespace, "interface": a.pod_interface}
        for a in found
    ]
    return json.dumps(entries, separators=(",", ":"))
