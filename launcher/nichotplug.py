"""NIC hotplug and unplug on the running domain (KubeVirt ≥ 1.4's, shared/nics.py).

Asked by virt-handler with the running VMI (`sync_interfaces`): each hot-pluggable NIC
(bridge-bound, multus) this pod was wired for (pod-network.json names its tap) and the
domain lacks is attached — on a migration target that is the NIC the migration came for;
each NIC marked absent that the domain still has is detached (the guest is asked; its
removal is waited for a while, then reported as still present). Asking again is cheap:
only what differs from the live XML is done. Aliases are `ua-<interface>`, as at boot.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from launcher import domxml
from launcher.nicplan import interface_plans
from launcher.plan import parse_vmi
from shared import nics, podnet
from shared.model import VirtualMachineInstance
from shared.wire.nics import InterfacesReply, SyncInterfacesArgs

log = structlog.get_logger("launcher.nichotplug")

ALIAS = "ua-"


class NicVirt(Protocol):
    """What NIC hotplug needs of libvirt (launcher.virt.Virt; fakes in unit tests)."""

    async def xml(self, name: str) -> str: ...
    async def attach_device(self, name: str, xml: str) -> None: ...
    async def detach_device(self, name: str, xml: str) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class NicConfig:
    network_file: Path  # virt-handler's wiring of this pod (shared/podnet.py)
    detach_wait: float = 10.0
    poll: float = 0.5


def live_interfaces(domain_xml: str) -> dict[str, ET.Element]:
    """The domain's interfaces by VMI interface name."""
    out = {}
    for iface in ET.fromstring(domain_xml).iterfind("devices/interface"):
        alias = iface.find("alias")
        name = alias.get("name", "") if alias is not None else ""
        if name.startswith(ALIAS):
            out[name.removeprefix(ALIAS)] = iface
    return out


def to_attach(
    vmi: VirtualMachineInstance, wired: frozenset[str], live: frozenset[str]
) -> list[str]:
    """Hot-pluggable, not absent, wired in this pod, not in the domain."""
    return [
        i.name or ""
        for i in nics.present(vmi)
        if nics.hot_pluggable(vmi.spec, i) and i.name in wired and i.name not in live
    ]


def to_detach(vmi: VirtualMachineInstance, live: frozenset[str]) -> list[str]:
    """Marked absent and still in the domain."""
    return [
        i.name or ""
        for i in vmi.spec.domain.devices.interfaces
        if nics.is_absent(i) and i.name in live
    ]


class NicHotplug:
    """Attaches and detaches the hot-plugged NICs of one domain."""

    def __init__(self, *, virt: NicVirt, domain: Callable[[], str], config: NicConfig) -> None:
        self._virt, self._domain, self._config = virt, domain, config
        self._lock = asyncio.Lock()

    async def sync(self, args: SyncInterfacesArgs) -> InterfacesReply:
        vmi = parse_vmi(args.vmi)
        async with self._lock:
            live = live_interfaces(await self._virt.xml(self._domain()))
            wiring = podnet.read(self._config.network_file)
            wired = frozenset(w.name for w in (wiring.interfaces if wiring is not None else ()))
            attached = await self._attach(vmi, wiring, to_attach(vmi, wired, frozenset(live)))
            detached = []
            for name in to_detach(vmi, frozenset(live)):
                await self._virt.detach_device(self._domain(), ET.tostring(live[name], "unicode"))
                detached.append(name)
            present = await self._settled(frozenset(detached))
        return InterfacesReply(attached=tuple(attached), detached=tuple(detached),
                               present=tuple(present))  # fmt: skip

    async def _attach(
        self, vmi: VirtualMachineInstance, wiring: podnet.PodWiring | None, names: list[str]
    ) -> list[str]:
        if not names:
            return []
        plans = {p.alias: p for p in interface_plans(vmi, wiring)}
        for name in names:
            await self._virt.attach_device(self._domain(), domxml.interface_xml(plans[name]))
            log.info("nic_attached", interface=name, tap=plans[name].tap)
        return names

    async def _settled(self, detaching: frozenset[str]) -> list[str]:
        """The domain's interfaces once the detached ones left (or the wait ran out)."""
        loop = asyncio.get_running_loop()
        ends = loop.time() + self._config.detach_wait
        while True:
            live = live_interfaces(await self._virt.xml(self._domain()))
            left = detaching & set(live)
            if not left:
                for name in detaching:
                    log.info("nic_detached", interface=name)
                return list(live)
            if loop.time() >= ends:
                log.warning("nic_detach_pending", interfaces=sorted(left))
                return list(live)
            await asyncio.sleep(self._config.poll)
