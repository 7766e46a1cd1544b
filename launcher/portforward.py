"""Masquerade's port forwards: guest ports reachable on the pod's IP.

Where virt-handler wired the pod (shared/podnet.py), its nftables rules lead the pod's
ports to the guest and nothing is done here. Otherwise masquerade is QEMU's user-mode
network (slirp) behind the pod's IP, so nothing
reaches the guest unless QEMU forwards a host port to it (`hostfwd_add`, a human-monitor
command of the netdev libvirt named `host<alias>`). The ports an interface lists
(`interfaces[].ports`) are forwarded once the domain runs, on the migration target too;
with none listed KubeVirt forwards every port, which slirp cannot do in one rule, so a
port is forwarded when first asked for (`ForwardPort`, the `portforward` subresource).
Forwards bind every address of the pod, as KubeVirt's DNAT rules match the pod's IP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from launcher.errors import CommandError, LibvirtFailure
from shared.model import VirtualMachineInstance
from shared.wire.errors import ErrorCode
from shared.wire.launcher_api import ForwardPortArgs

log = structlog.get_logger("launcher.portforward")

DEFAULT_INTERFACE = "default"  # the pod network KubeVirt auto-attaches


class Monitor(Protocol):
    async def monitor_command(self, name: str, command: str) -> str: ...


class NoMasquerade(CommandError):
    """The VMI has no masquerade interface: no pod port leads to the guest."""

    code_value = ErrorCode.INVALID_ARGUMENT


@dataclass(frozen=True, slots=True)
class Forward:
    protocol: str
    port: int


def masquerade_alias(vmi: VirtualMachineInstance) -> str | None:
    """The alias of the VMI's masquerade (user-mode) interface, if any."""
    interfaces = vmi.spec.domain.devices.interfaces
    if not interfaces and not vmi.spec.networks:
        return DEFAULT_INTERFACE
    return next((i.name or "" for i in interfaces if i.masquerade is not None), None)


def listed_forwards(vmi: VirtualMachineInstance) -> tuple[Forward, ...]:
    """interfaces[].ports of the masquerade interface (TCP unless the port says UDP), and
    the guest ports of httpGet / tcpSocket probes: the kubelet probes the pod's IP."""
    alias = masquerade_alias(vmi)
    iface = vmi.spec.domain.devices.interface(alias) if alias else None
    listed = [
        Forward(protocol=(p.protocol or "TCP").lower(), port=p.port)
        for p in (iface.ports if iface is not None else ())
    ]
    for probe in (vmi.spec.readiness_probe, vmi.spec.liveness_probe):
        port = probe.guest_port if probe is not None else None
        if port is not None and alias is not None:
            listed.append(Forward(protocol="tcp", port=port))
    return tuple(dict.fromkeys(listed))


def _passt(vmi: VirtualMachineInstance | None) -> bool:
    interfaces = vmi.spec.domain.devices.interfaces if vmi is not None else ()
    return any(i.uses_passt() for i in interfaces)


class PortForwards:
    """The forwards of one domain, each added once (QEMU refuses a second identical rule)."""

    def __init__(
        self,
        *,
        monitor: Monitor,
        domain: str,
        vmi: Callable[[], VirtualMachineInstance | None],
        wired: Callable[[], bool] = lambda: False,
    ) -> None:
        self._monitor = monitor
        self._wired = wired
        self._domain = domain
        self._vmi = vmi
        self._added: set[Forward] = set()
        self._lock = asyncio.Lock()

    async def forward(self, args: ForwardPortArgs) -> dict[str, int]:
        """ForwardPort: the guest's port on the same port of the pod."""
        await self._ensure(Forward(protocol=args.protocol, port=args.port))
        return {"port": args.port}

    async def apply_listed(self) -> None:
        """Forward every listed port not forwarded yet (after each Sync: cheap when done)."""
        vmi = self._vmi()
        for forward in listed_forwards(vmi) if vmi is not None else ():
            await self._ensure(forward)

    async def _ensure(self, forward: Forward) -> None:
        vmi = self._vmi()
        if _passt(vmi):
            return  # passt forwards the pod's ports itself
        alias = masquerade_alias(vmi) if vmi is not None else None
        if alias is None:
            raise NoMasquerade(
                "the VMI has no masquerade interface on the pod network: no port of the pod "
                "leads to the guest",
                {"field": "spec.domain.devices.interfaces"},
            )
        if self._wired():
            return  # virt-handler's NAT rules already lead the pod's ports to the guest
        async with self._lock:
            if forward in self._added:
                return
            rule = f"{forward.protocol}::{forward.port}-:{forward.port}"
            out = await self._monitor.monitor_command(
                self._domain, f"hostfwd_add hostua-{alias} {rule}"
            )
            if out.strip():
                raise LibvirtFailure(f"QEMU refused port forward {rule}: {out.strip()}")
            self._added.add(forward)
        log.info("port_forwarded", protocol=forward.protocol, port=forward.port)
