"""The metrics a guest with `devices.downwardMetrics` reads, in vhostmd's XML (what
vm-dump-metrics parses): the node's CPU, memory and paging figures (host context) and the
VMI's own limits (vm context), as KubeVirt's downward metrics carry them.

The request protocol on the virtio-serial port org.github.vhostmd.1 (QEMU's end is a Unix
socket the handler dials): the guest writes `GET /metrics/XML`, a blank line, and gets the
document followed by a blank line; anything else gets `INVALID REQUEST` and a blank line.
"""

from __future__ import annotations

import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from shared.model import VirtualMachineInstance
from shared.model.quantity import parse_bytes

REQUEST = "GET /metrics/XML"
INVALID = b"INVALID REQUEST\n\n"
VENDOR = "kubevirt-py"
KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One <metric>: name, vhostmd type (real64, uint64, string …), context, unit."""

    name: str
    type: str
    value: str
    context: str = "host"
    unit: str | None = None


def _fields(text: str) -> dict[str, int]:
    """`key value [kB]` or `key: value kB` lines as integers."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _cpu_seconds(stat: str) -> float:
    """Busy CPU time of the node (user, nice, system, irq, softirq, steal), in seconds."""
    for line in stat.splitlines():
        if line.startswith("cpu "):
            ticks = [int(x) for x in line.split()[1:]]
            busy = sum(ticks[i] for i in (0, 1, 2, 5, 6, 7) if i < len(ticks))
            return busy / os.sysconf("SC_CLK_TCK")
    return 0.0


def host_metrics(
    *, node: str, proc: Path = Path("/proc"), now: float | None = None
) -> list[Metric]:
    """The node's figures, from /proc (stat, meminfo, vmstat)."""
    mem = _fields((proc / "meminfo").read_text())
    vm = _fields((proc / "vmstat").read_text())
    free = mem.get("MemFree", 0)
    swap_free = mem.get("SwapFree", 0)
    swap_used = mem.get("SwapTotal", 0) - swap_free
    cpu = _cpu_seconds((proc / "stat").read_text())
    wall = time.time() if now is None else now
    rows: list[tuple[str, str, str, str | None]] = [
        ("TotalCPUTime", "real64", f"{cpu:.6f}", "s"),
        ("NumberOfPhysicalCPUs", "int64", str(os.cpu_count() or 1), None),
        ("FreePhysicalMemory", "uint64", str(free), "KiB"),
        ("FreeVirtualMemory", "uint64", str(swap_free + free), "KiB"),
        ("UsedVirtualMemory", "uint64", str(swap_used + mem.get("MemTotal", 0) - free), "KiB"),
        ("PagedInMemory", "uint64", str(vm.get("pgpgin", 0)), "KiB"),
        ("PagedOutMemory", "uint64", str(vm.get("pgpgout", 0)), "KiB"),
        ("Time", "int64", str(int(wall)), "s"),
        ("HostName", "string", node, None),
        ("VirtualizationVendor", "string", VENDOR, None),
    ]
    return [Metric(name=n, type=t, value=v, unit=u) for n, t, v, u in rows]


def vm_metrics(vmi: VirtualMachineInstance) -> list[Metric]:
    """The VMI's own allocation: its vCPUs and its memory."""
    domain = vmi.spec.domain
    guest = domain.memory.guest if domain.memory is not None else None
    memory = guest if guest is not None else domain.resources.requests.memory
    mem_bytes = parse_bytes(memory) if memory is not None else 0
    rows: list[tuple[str, str, str | None]] = [
        ("ResourceProcessorLimit", str(domain.vcpus()), None),
        ("ResourceMemoryLimit", str(mem_bytes // MIB), "MiB"),
        ("PhysicalMemoryAllocatedToVirtualSystem", str(mem_bytes // KIB), "KiB"),
    ]
    return [Metric(name=n, type="uint64", value=v, context="vm", unit=u) for n, v, u in rows]


def render(metrics: Sequence[Metric]) -> bytes:
    """The <metrics> document and the blank line vm-dump-metrics waits for."""
    root = ET.Element("metrics")
    for m in metrics:
        attrs: Mapping[str, str] = {"type": m.type, "context": m.context}
        el = ET.SubElement(root, "metric", {**attrs, **({"unit": m.unit} if m.unit else {})})
        ET.SubElement(el, "name").text = m.name
        ET.SubElement(el, "value").text = m.value
    ET.indent(root)
    return ET.tostring(root, encoding="unicode").encode() + b"\n\n"


def answer(request: str, document: bytes) -> bytes:
    """The reply to one request line: the document, or INVALID REQUEST."""
    method, _, uri = request.strip().partition(" ")
    path = uri.split("?", 1)[0]
    return document if method == "GET" and path == "/metrics/XML" else INVALID
