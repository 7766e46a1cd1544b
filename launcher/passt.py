"""The passt binding (KubeVirt's core `passtBinding`), run by the launcher itself.

passt (Debian's package) is a user-mode network stack: the guest gets the pod's address,
MAC-level frames reach passt over a UNIX socket and leave as ordinary sockets of the pod,
and the pod's TCP/UDP ports (`interfaces[].ports`, or every port) are forwarded to the
guest. libvirt 9.0 (Debian 12, the launcher's) has no `<backend type='passt'/>`, so the
launcher starts passt in its own network namespace (the pod's; no privileges needed beyond
binding the forwarded ports) and hands QEMU 7.2 the socket as `-netdev stream` with a
`virtio-net-pci` device, through libvirt's `qemu:commandline` (the domain is "tainted:
custom-argv" in libvirt's log).

Live migration (KubeVirt 1.8's semantics): the target launcher starts its own passt when it
is prepared, before the incoming QEMU connects, told to give the guest the address it
already holds (`--address`, the first pod's IP from the VMI's status), so the guest keeps
its address and stays reachable on the target pod's IP. Open TCP connections do not
survive: carrying them needs passt's own migration (TCP_REPAIR through passt-repair, passt
2025_02 and later, over vhost-user), which Debian 12's passt (2023_03) does not have.

On a dual-stack pod QEMU connects to the launcher, which relays to passt's own socket and
leaves out the guest's IPv6 frames from `::` (launcher/passtfilter.py: passt 2023_03 would
otherwise send inbound IPv6 connections to `::` after the guest's duplicate address
detection), and the migration target's passt is told the guest's IPv6 address too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from launcher.errors import LibvirtFailure
from launcher.passtfilter import PasstFilter, pod_has_ipv6
from launcher.qemuns import QEMU_NS

log = structlog.get_logger("launcher.passt")

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PasstInterface:
    """One passt-bound interface: its socket, the guest's MAC and what is forwarded."""

    alias: str
    socket: Path
    mac: str
    # ("tcp"|"udp", ports); an empty tuple of ports: every port
    forwards: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # The guest's addresses (IPv4, and IPv6 on a dual-stack pod) when they are not this
    # pod's (a migration target keeps those the guest took from the first pod); (): passt
    # takes the pod's own.
    guest_addresses: tuple[str, ...] = ()
    # passt's own MAC (the guest's gateway): the same on every pod the VMI runs in, so the
    # guest's ARP entry for it stays right after a migration; None: the pod interface's.
    own_mac: str | None = None

    @property
    def netdev(self) -> str:
        return f"passt-{self.alias}"


def guest_mac(uid: str, alias: str) -> str:
    """A stable, locally administered MAC for a passt interface without `macAddress`."""
    digest = hashlib.sha256(f"{uid}/{alias}".encode()).digest()[:5]
    return ":".join(f"{b:02x}" for b in (b"\x02" + digest))


def inner_socket(iface: PasstInterface) -> Path:
    """passt's own socket when the launcher relays QEMU's stream to it (passtfilter)."""
    return iface.socket.with_name(f"{iface.socket.stem}-passt.sock")


def argv(iface: PasstInterface, *, socket: Path | None = None) -> list[str]:
    """passt in the foreground on `socket` (the interface's, which QEMU opens, unless the
    launcher relays), forwarding what it lists (no PID file: passt writes it after dropping
    to an unprivileged user, and the launcher holds the process anyway)."""
    args = ["passt", "--foreground", "--socket", str(socket or iface.socket)]
    flags = {"tcp": "--tcp-ports", "udp": "--udp-ports"}
    for proto, ports in iface.forwards:  # passt forwards nothing it is not told to
        args += [flags[proto], ",".join(str(p) for p in sorted(set(ports))) if ports else "all"]
    for address in iface.guest_addresses:  # inbound to the pod's addresses reaches the guest
        args += ["--address", address]
    if iface.own_mac:
        args += ["--mac-addr", iface.own_mac]
    return args


def pci_slot(machine: str, index: int) -> str:
    """A root-bus PCI address libvirt does not hand out, for the `index`th passt device:
    libvirt numbers its own devices from the low slots up and knows nothing of these (on pc
    the VGA took slot 2 from an unplaced one); q35's high slots are the chipset's."""
    if "q35" in machine:
        return f"bus=pcie.0,addr={0x18 - index:#x}"
    return f"bus=pci.0,addr={0x1F - index:#x}"


def commandline(dom: ET.Element, ifaces: Sequence[PasstInterface], *, machine: str) -> None:
    """QEMU's `-netdev stream` to each passt socket and its virtio-net device."""
    if not ifaces:
        return
    cmd = ET.SubElement(dom, f"{{{QEMU_NS}}}commandline")
    for n, i in enumerate(ifaces):
        netdev = f"stream,id={i.netdev},server=off,addr.type=unix,addr.path={i.socket}"
        device = (
            f"virtio-net-pci,netdev={i.netdev},id={i.netdev},mac={i.mac},romfile=,"
            f"{pci_slot(machine, n)}"
        )
        for value in ("-netdev", netdev, "-device", device):
            ET.SubElement(cmd, f"{{{QEMU_NS}}}arg", value=value)


def aliases_by_mac(dom: ET.Element) -> dict[str, str]:
    """MAC → interface name of the passt devices in a domain XML's qemu:commandline."""
    found = {}
    for arg in dom.iter(f"{{{QEMU_NS}}}arg"):
        value = arg.get("value") or ""
        if not value.startswith("virtio-net-pci,"):
            continue
        opts = dict(kv.partition("=")[::2] for kv in value.split(",")[1:])
        netdev, mac = opts.get("netdev", ""), opts.get("mac", "")
        if netdev.startswith("passt-") and mac:
            found[mac.lower()] = netdev.removeprefix("passt-")
    return found


def _how(proc: asyncio.subprocess.Process) -> str:
    """'running', 'exited with status N' or 'killed by SIGNAME' (SIGSYS: a seccomp filter)."""
    code = proc.returncode
    if code is None:
        return "running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


class Passt:
    """The passt processes of this launcher's domain (children of the launcher)."""

    def __init__(self, *, relay: bool | None = None) -> None:
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._logs: dict[str, Path] = {}
        self._filters: dict[str, PasstFilter] = {}
        self._relay = relay  # None: relay when the pod has a global IPv6 address

    async def start(self, ifaces: Sequence[PasstInterface]) -> None:
        """Each interface's passt running and listening on its socket (before QEMU); on a
        dual-stack pod passt listens on its own socket and the launcher's filter on the
        interface's (passtfilter)."""
        if self._relay is None:
            self._relay = pod_has_ipv6()
        for iface in ifaces:
            if iface.alias in self._procs and self._procs[iface.alias].returncode is None:
                continue
            socket = inner_socket(iface) if self._relay else iface.socket
            iface.socket.unlink(missing_ok=True)
            socket.unlink(missing_ok=True)
            logfile = iface.socket.with_suffix(".log")
            try:
                with logfile.open("wb") as out:
                    proc = await asyncio.create_subprocess_exec(
                        *argv(iface, socket=socket),
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=out,
                        stderr=out,
                    )
            except FileNotFoundError as e:
                raise LibvirtFailure(f"interface {iface.alias}: passt is not installed") from e
            self._procs[iface.alias] = proc
            self._logs[iface.alias] = logfile
            await self._listening(iface, proc, socket=socket)
            if self._relay:
                relay = PasstFilter(iface.alias, listen=iface.socket, passt_socket=socket)
                await relay.start()
                self._filters[iface.alias] = relay
            log.info(
                "passt_started", interface=iface.alias, pid=proc.pid, uid=os.getuid(),
                relayed=bool(self._relay),
            )  # fmt: skip

    async def _listening(
        self, iface: PasstInterface, proc: asyncio.subprocess.Process, *, socket: Path
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        while not socket.exists():
            if proc.returncode is not None or loop.time() > deadline:
                err = ""
                with contextlib.suppress(OSError):
                    err = iface.socket.with_suffix(".log").read_text(errors="replace")
                lines = [x for x in err.splitlines() if x.strip() and "syslog" not in x]
                why = "; ".join(lines[-3:]) or f"no socket within {START_TIMEOUT}s"
                raise LibvirtFailure(
                    f"interface {iface.alias}: passt did not start ({_how(proc)}): {why}"
                )
            await asyncio.sleep(0.05)

    def exited(self) -> str:
        """How each passt that is no longer running ended, with its log's last lines ("" when
        all run): said beside a domain that failed to start."""
        gone = []
        for alias, proc in self._procs.items():
            if proc.returncode is None:
                continue
            log_path = self._logs.get(alias)
            tail = ""
            with contextlib.suppress(OSError):
                if log_path is not None:
                    text = log_path.read_text(errors="replace")
                    tail = "; ".join(x for x in text.splitlines()[-3:] if "syslog" not in x)
            gone.append(f"passt of interface {alias} {_how(proc)}: {tail}")
        return "; ".join(gone)

    async def stop(self) -> None:
        """Terminate every passt and relay (the guest's NICs lose their wire)."""
        for relay in self._filters.values():
            await relay.stop()
        self._filters.clear()
        for alias, proc in list(self._procs.items()):
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            del self._procs[alias]
