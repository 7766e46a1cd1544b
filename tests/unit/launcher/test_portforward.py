"""Masquerade's port forwards: which ports, on which netdev, each added once."""

from __future__ import annotations

from typing import Any

import pytest

from launcher.errors import LibvirtFailure
from launcher.portforward import NoMasquerade, PortForwards, listed_forwards, masquerade_alias
from shared.model import VirtualMachineInstance
from shared.wire.errors import InvalidArgument
from shared.wire.launcher_api import ForwardPortArgs


def _vmi(interfaces: list[dict[str, Any]] | None = None) -> VirtualMachineInstance:
    spec: dict[str, Any] = {"domain": {"devices": {}}}
    if interfaces is not None:
        spec["domain"]["devices"]["interfaces"] = interfaces
        spec["networks"] = [{"name": i["name"], "pod": {}} for i in interfaces]
    return VirtualMachineInstance.from_dict({"metadata": {"name": "v"}, "spec": spec})


class Monitor:
    def __init__(self, answer: str = "") -> None:
        self.commands: list[tuple[str, str]] = []
        self.answer = answer

    async def monitor_command(self, name: str, command: str) -> str:
        self.commands.append((name, command))
        return self.answer


def test_listed_ports_of_the_masquerade_interface() -> None:
    """interfaces[].ports of the masquerade interface, TCP unless UDP is named."""
    vmi = _vmi([{"name": "pod", "masquerade": {},
                 "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}])  # fmt: skip
    assert [(f.protocol, f.port) for f in listed_forwards(vmi)] == [("tcp", 80), ("udp", 53)]
    assert masquerade_alias(_vmi()) == "default"  # the auto-attached pod network
    assert masquerade_alias(_vmi([{"name": "br", "bridge": {}}])) is None


async def test_forwards_go_to_the_netdev_once() -> None:
    """hostfwd_add on libvirt's netdev of the interface (host + alias), once per port."""
    monitor = Monitor()
    vmi = _vmi([{"name": "pod", "masquerade": {}, "ports": [{"port": 80}]}])
    forwards = PortForwards(monitor=monitor, domain="ns_v", vmi=lambda: vmi)
    await forwards.apply_listed()
    await forwards.apply_listed()
    assert await forwards.forward(ForwardPortArgs(port=22)) == {"port": 22}
    await forwards.forward(ForwardPortArgs(port=80))
    assert monitor.commands == [
        ("ns_v", "hostfwd_add hostua-pod tcp::80-:80"),
        ("ns_v", "hostfwd_add hostua-pod tcp::22-:22"),
    ]


async def test_refusals_are_typed() -> None:
    """No masquerade interface, or QEMU's refusal, is a command error naming why."""
    bridged = _vmi([{"name": "br", "bridge": {}}])
    with pytest.raises(NoMasquerade, match="no masquerade"):
        await PortForwards(monitor=Monitor(), domain="d", vmi=lambda: bridged).forward(
            ForwardPortArgs(port=22)
        )
    refusing = PortForwards(monitor=Monitor("Could not set up host forwarding rule"),
                            domain="d", vmi=_vmi)  # fmt: skip
    with pytest.raises(LibvirtFailure, match="Could not set up"):
        await refusing.forward(ForwardPortArgs(port=22))


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"port": 0},
        {"port": 65536},
        {"port": "22"},
        {"port": 22, "protocol": "udp"},
        {"port": 22, "extra": 1},
    ],
)
def test_forward_port_arguments_are_checked(args: dict[str, Any]) -> None:
    """The wire arguments: a port 1-65535, tcp, nothing else."""
    with pytest.raises(InvalidArgument):
        ForwardPortArgs.from_wire(args)


def test_probe_ports_are_forwarded_too() -> None:
    """httpGet / tcpSocket probe ports reach the guest: the kubelet probes the pod's IP."""
    vmi = _vmi([{"name": "pod", "masquerade": {}, "ports": [{"port": 80}]}])
    spec = vmi.spec
    probed = VirtualMachineInstance.from_dict(
        {
            "metadata": {"name": "v"},
            "spec": {
                **spec.to_dict(),
                "readinessProbe": {"httpGet": {"port": 80}},
                "livenessProbe": {"tcpSocket": {"port": 7}},
            },
        }
    )
    assert [(f.protocol, f.port) for f in listed_forwards(probed)] == [("tcp", 80), ("tcp", 7)]
