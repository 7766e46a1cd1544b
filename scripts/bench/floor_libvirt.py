"""(i) The raw-libvirt floor of bench-handler (issue 14, item 1), in the same run: the same N
guests started at the same rate with plain libvirt-python on this host, no Kubernetes, no
launcher. The domain XML is the launcher's own (a bare launcher on the host generates it
once; each guest gets its own name, uuid, disk overlay, serial log and sockets). Twice:

- one private libvirtd per guest, started as the launcher starts its own (the launcher's
  LibvirtDaemon: a mount namespace, no capability seed, no cgroups, as in a pod on a real
  node), so each pays libvirtd's start and its QEMU capability probe;
- one shared libvirtd for all guests, started (and its capabilities probed) before the
  first guest's slot.

Each guest is timed from its slot (the moment our stack's VMI would be created) to the
domain running (define + create returned) and to its boot marker on its serial console.
CPU-seconds per guest: this driver (libvirt-python), the libvirtd(s) with what they reaped
(the capability probes), QEMU from its start to the guest's boot marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import resource
import shutil
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import libvirt
import uvloop
from proc_sampler import BOOT_MARKER, host_busy, read_stat

from launcher.daemonpaths import DaemonPaths
from launcher.libvirtd import LibvirtDaemon
from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import Launcher, call, tiny_vmi

LIBVIRTD, TINI = Path("/usr/sbin/libvirtd"), Path("/usr/bin/tini")
GUEST_RUN = "/run/libvirt/kvpy"  # where QEMU sees the guest's sockets (the namespace's /run)
POLL = 0.1


@dataclass(frozen=True, slots=True)
class Template:
    """The launcher's domain XML and the disk its overlay is backed by."""

    xml: str
    backing: Path
    work: Path


@dataclass
class FloorGuest:
    index: int
    root: Path
    slot: float = 0.0  # time.monotonic() the guest's start was due
    running: float = float("nan")  # seconds from the slot to define+create returned
    booted: float = float("nan")  # seconds from the slot to the boot marker
    qemu_cpu: float = float("nan")  # QEMU's CPU-seconds at the marker
    qemu_start_cpu: float = float("nan")  # and when the domain was running (before the guest)
    daemon: LibvirtDaemon | None = None

    @property
    def name(self) -> str:
        return f"floor_{self.index:03d}"

    @property
    def serial_log(self) -> Path:
        return self.root / "serial.log"


@dataclass
class FloorRun:
    """One floor: per guest milestones, and CPU-seconds per component over all guests."""

    label: str
    guests: list[FloorGuest] = field(default_factory=list)
    driver_cpu: float = 0.0
    libvirtd_cpu: float = 0.0
    qemu_boot_cpu: float = 0.0
    qemu_start_cpu: float = 0.0
    host_busy: float = 0.0


def launcher_template(work: Path) -> Template:
    """Boot the tiny guest once under a bare launcher and keep its domain XML (inactive)
    and its files (the overlay's backing disk, the kernel, the cloud-init ISO)."""
    root = work / "floor-template"
    saved = root / "template.json"
    if saved.exists():  # made once per run: (i) and (k) share it
        kept = json.loads(saved.read_text())
        return Template(xml=kept["xml"], backing=Path(kept["backing"]), work=work)
    # Stopped while its guest boots (deaf to ACPI): destroyed after 1 s, not the default 10 s.
    launcher = Launcher(root=root, vmi=tiny_vmi(name="floor"), grace=1)
    launcher.start()
    try:
        uvloop.run(call(launcher, Method.SYNC, {"vmi": launcher.vmi}))
        xml = subprocess.run(
            ["virsh", "-c", launcher.libvirt_uri, "dumpxml", "--inactive", "default_floor"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
    finally:
        launcher.terminate()
    overlay = ET.fromstring(xml).find("devices/disk[@device='disk']/source")
    assert overlay is not None, "the launcher's domain has no disk"
    info = subprocess.run(
        ["qemu-img", "info", "-U", "--output=json", overlay.attrib["file"]],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    backing = Path(json.loads(info)["backing-filename"])
    saved.write_text(json.dumps({"xml": xml, "backing": str(backing)}))
    return Template(xml=xml, backing=backing, work=work)


def guest_xml(template: Template, guest: FloorGuest, *, sockets: str) -> str:
    """The launcher's XML for one floor guest: its name, uuid, overlay, log and sockets;
    no cgroup partition (the floor's libvirtd makes none, as on a real node)."""
    dom = ET.fromstring(template.xml)
    for tag, value in (("name", guest.name), ("uuid", str(uuid.uuid4()))):
        node = dom.find(tag)
        assert node is not None
        node.text = value
    for res in dom.findall("resource"):
        dom.remove(res)
    disk = dom.find("devices/disk[@device='disk']/source")
    assert disk is not None
    disk.attrib["file"] = str(guest.root / "overlay.qcow2")
    for log in dom.iter("log"):
        log.attrib["file"] = str(guest.serial_log)
    for source in dom.iter("source"):
        path = source.attrib.get("path", "")
        if path.startswith(f"{GUEST_RUN}/"):
            source.attrib["path"] = f"{sockets}/{Path(path).name}"
    mac = dom.find("devices/interface/mac")
    if mac is not None:
        mac.attrib["address"] = f"52:54:00:f1:{guest.index // 256:02x}:{guest.index % 256:02x}"
    return ET.tostring(dom, encoding="unicode")


def prepare_guest(template: Template, guest: FloorGuest) -> None:
    """The guest's disk overlay, made before its slot (the launcher makes its own in the
    timed path: the floor leaves that out)."""
    guest.root.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2",
         "-b", str(template.backing), str(guest.root / "overlay.qcow2")],
        check=True, timeout=60,
    )  # fmt: skip


def new_daemon(root: Path) -> LibvirtDaemon:
    daemon = LibvirtDaemon(paths=DaemonPaths(root=root), libvirtd=LIBVIRTD, tini=TINI)
    daemon.prepare(capabilities_seed=None, cgroups=False)
    return daemon


def define_and_start(uri: str, xml: str | None) -> None:
    """Define and start the domain (None: only connect and read the capabilities)."""
    conn = libvirt.open(uri)
    try:
        if xml is None:
            conn.getCapabilities()
        else:
            conn.defineXML(xml).create()
    finally:
        conn.close()


async def start_own(template: Template, guest: FloorGuest) -> None:
    """A private libvirtd for this guest, then define + create on it."""
    guest.daemon = new_daemon(guest.root / "libvirt")
    await guest.daemon.start()
    xml = guest_xml(template, guest, sockets=GUEST_RUN)
    await asyncio.to_thread(define_and_start, guest.daemon.paths.uri, xml)


async def run_floor(
    template: Template, *, count: int, rate: float, shared: bool, timeout: float
) -> FloorRun:
    run = FloorRun(label="one shared libvirtd" if shared else "one libvirtd per guest")
    base = template.work / ("floor-shared" if shared else "floor-own")
    run.guests = [FloorGuest(index=i, root=base / f"g{i:03d}") for i in range(count)]
    for guest in run.guests:
        prepare_guest(template, guest)
    common = new_daemon(base / "libvirt") if shared else None
    try:
        if common is not None:
            await common.start()
            await asyncio.to_thread(define_and_start, common.paths.uri, None)  # the probe
        cpu_before, busy_before = resource.getrusage(resource.RUSAGE_SELF), host_busy()
        async with asyncio.TaskGroup() as tg:
            began = time.monotonic()
            for guest in run.guests:
                guest.slot = began + guest.index / rate
                tg.create_task(_one(template, guest, common, timeout=timeout))
        run.host_busy = host_busy() - busy_before
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        run.driver_cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (
            cpu_before.ru_utime + cpu_before.ru_stime
        )
        run.libvirtd_cpu = _daemons_cpu([g.daemon for g in run.guests] + [common])
        run.qemu_boot_cpu = sum(g.qemu_cpu for g in run.guests if not math.isnan(g.qemu_cpu))
        run.qemu_start_cpu = sum(
            g.qemu_start_cpu for g in run.guests if not math.isnan(g.qemu_start_cpu)
        )
    finally:
        for daemon in [g.daemon for g in run.guests] + [common]:
            if daemon is not None:
                await daemon.stop()
        shutil.rmtree(base, ignore_errors=True)  # the guests' overlays and daemons' dirs
    return run


async def _one(
    template: Template, guest: FloorGuest, common: LibvirtDaemon | None, *, timeout: float
) -> None:
    await asyncio.sleep(max(0.0, guest.slot - time.monotonic()))
    async with asyncio.timeout(timeout):
        if common is None:
            await start_own(template, guest)
        else:
            sockets = common.paths.guest_dir / guest.name
            sockets.mkdir(parents=True, exist_ok=True)
            xml = guest_xml(template, guest, sockets=f"{GUEST_RUN}/{guest.name}")
            await asyncio.to_thread(define_and_start, common.paths.uri, xml)
        guest.running = time.monotonic() - guest.slot
        daemon = common or guest.daemon
        assert daemon is not None
        pid = (daemon.paths.qemu_pids / f"{guest.name}.pid").read_text().strip()
        started = read_stat(pid)
        guest.qemu_start_cpu = started.own if started else float("nan")
        await _until_marker(guest.serial_log)
        stat = read_stat(pid)
        guest.booted = time.monotonic() - guest.slot
        guest.qemu_cpu = stat.own if stat else float("nan")


async def _until_marker(log: Path) -> None:
    """Polls the serial log (QEMU writes it; nothing to wait on but the file)."""
    while True:
        if BOOT_MARKER in _read(log):
            return
        await asyncio.sleep(POLL)


def _read(path: Path) -> bytes:
    with contextlib.suppress(OSError):
        return path.read_bytes()
    return b""


def _daemons_cpu(daemons: list[LibvirtDaemon | None]) -> float:
    """libvirtd's CPU-seconds (own + reaped: the capability probes) in each daemon's tree,
    QEMU left out; read while the daemons still run."""
    total = 0.0
    for daemon in daemons:
        if daemon is None:
            continue
        with contextlib.suppress(OSError, ValueError):
            pid = daemon.paths.pidfile.read_text().strip()
            stat = read_stat(pid)
            total += (stat.own + stat.reaped) if stat else 0.0
    return total


@dataclass(frozen=True, slots=True)
class Ours:
    """Our stack's figures from the same run: milestones per VMI (seconds from create) and
    the CPU split by component (cpu_table.split's rows, CPU-seconds over all VMIs)."""

    running: list[float]
    booted: list[float]
    rows: dict[str, float]
    vmis: int


def _p(values: list[float], q: float) -> float:
    ordered = sorted(v for v in values if not math.isnan(v))
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report_milestones(ours: Ours, floors: list[FloorRun], rate: float) -> None:
    print(f"(i) the raw-libvirt floor: the same {ours.vmis} guests at {rate:g}/s, plain "
          "libvirt-python on this host, the launcher's domain XML")  # fmt: skip
    print(f"    {'':34s} {'-> domain running':>24s} {'-> guest boot marker':>24s}")
    print(f"    {'':34s} {'P50 / P95 s':>24s} {'P50 / P95 s':>24s}")

    def line(label: str, run: list[float], boot: list[float], ratio: str = "") -> None:
        a = f"{_p(run, 0.5):.2f} / {_p(run, 0.95):.2f}"
        b = f"{_p(boot, 0.5):.2f} / {_p(boot, 0.95):.2f}"
        print(f"    {label:34s} {a:>24s} {b:>24s}{ratio}")

    line("kubevirt-py (create -> VMI Running)", ours.running, ours.booted)
    for floor in floors:
        run = [g.running for g in floor.guests]
        boot = [g.booted for g in floor.guests]
        ratios = (
            f"   ours / floor: {_p(ours.running, 0.5) / _p(run, 0.5):.2f}x / "
            f"{_p(ours.running, 0.95) / _p(run, 0.95):.2f}x running, "
            f"{_p(ours.booted, 0.5) / _p(boot, 0.5):.2f}x / "
            f"{_p(ours.booted, 0.95) / _p(boot, 0.95):.2f}x booted"
        )
        line(f"floor, {floor.label}", run, boot, ratios)
    print("    (target, issue 26: create -> Running P50 and P95 within 1.5x of the floor with one "
          "libvirtd per guest; goal 1.2x)")  # fmt: skip


def report_cpu(ours: Ours, floors: list[FloorRun]) -> None:
    """The component table, CPU-seconds per VMI, the floors' columns beside ours."""
    n, r = max(1, ours.vmis), ours.rows
    qemu_floor = [(f.qemu_start_cpu, f.qemu_boot_cpu) for f in floors]
    table: list[tuple[str, float, list[float]]] = [
        ("virt-controller", r.get("controller", 0.0), [math.nan] * len(floors)),
        ("virt-handler", r.get("handler", 0.0), [math.nan] * len(floors)),
        ("pod start (kubelet, containerd, shim, runc, init)",
         sum(r.get(k, 0.0) for k in ("kubelet", "containerd", "shim", "init")), [math.nan] * len(floors)),
        ("launcher Python / floor: libvirt-python driver",
         r.get("launcher", 0.0), [f.driver_cpu for f in floors]),
        ("libvirtd (+ tini: capability probes; pod rest)",
         sum(r.get(k, 0.0) for k in ("libvirtd", "tini", "pod_rest")),
         [f.libvirtd_cpu for f in floors]),
        ("QEMU before the guest runs (floor only)", float("nan"), [s for s, _ in qemu_floor]),
        ("QEMU start + guest boot, to the marker", r.get("qemu_boot", 0.0), [b for _, b in qemu_floor]),
    ]  # fmt: skip
    heads = "".join(f" {'floor: ' + f.label:>30s}" for f in floors)
    print("(j) CPU-seconds per VMI by component, ours (window of (g)) beside the floors")
    print(f"    {'component':52s} {'kubevirt-py':>11s}{heads}")

    def cell(value: float, width: int) -> str:
        return f" {'-':>{width}s}" if math.isnan(value) else f" {value / n:{width}.3f}"

    for label, value, floor_values in table:
        cols = "".join(cell(v, 30) for v in floor_values)
        print(f"    {label:52s}{cell(value, 11)}{cols}")
    stack = sum(v for label, v, _ in table[:5])
    boot = r.get("qemu_boot", 0.0) or float("nan")
    floor_stack = [f.driver_cpu + f.libvirtd_cpu for f in floors]
    print(
        f"    stack (all but QEMU) per VMI: ours {stack / n:.3f} CPU-s = {stack / boot:.2f}x the "
        f"guest's start cost (target <= 0.25x); kubevirt-py alone "
        f"{(stack - table[2][1]) / n:.3f} = {(stack - table[2][1]) / boot:.2f}x; floors "
        + ", ".join(f"{v / n:.3f}" for v in floor_stack)
    )
