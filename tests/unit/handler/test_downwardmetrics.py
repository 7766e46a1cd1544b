"""devices.downwardMetrics on the handler's side (handler/vhostmd.py, downwardmetrics.py):
the node's figures read from /proc and the VMI's allocation in vhostmd's XML; a channel
socket where a running VMI's launcher pod has it is dialled, `GET /metrics/XML` and a
blank line answered with the document and a blank line, anything else with INVALID
REQUEST; a VMI that does not ask for the device gets no channel. A downwardMetrics volume's
vhostmd disk is rewritten with the same document, never through a symlink."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from handler import vhostmd
from handler.downwardmetrics import DownwardMetrics, channel_socket, private_dir, write_disk
from shared import podlayout, vhostmddisk
from shared.model import VirtualMachineInstance
from shared.wire.unixpath import short_path
from tests.unit.handler.fakes import vmi_dict
from tests.unit.handler.waiting import until

MEMINFO = "MemTotal:  2048000 kB\nMemFree:  1024000 kB\nSwapTotal: 100 kB\nSwapFree: 40 kB\n"
VMSTAT = "pgpgin 111\npgpgout 222\n"
STAT = "cpu  100 0 50 1000 5 0 0 0 0 0\ncpu0 100 0 50 1000 5 0 0 0 0 0\n"


def _proc(tmp: Path) -> Path:
    proc = tmp / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text(MEMINFO)
    (proc / "vmstat").write_text(VMSTAT)
    (proc / "stat").write_text(STAT)
    return proc


def _vmi(*, device: bool = True, pod: str = "pod-1") -> VirtualMachineInstance:
    raw = vmi_dict(phase="Running", pod_uid=pod)
    raw["spec"]["domain"]["cpu"] = {"cores": 2}
    raw["spec"]["domain"]["memory"] = {"guest": "128Mi"}
    if device:
        raw["spec"]["domain"]["devices"]["downwardMetrics"] = {}
    return VirtualMachineInstance.from_dict(raw)


def _values(document: bytes) -> dict[tuple[str, str], str]:
    root = ET.fromstring(document)
    assert root.tag == "metrics"
    return {
        (m.get("context") or "", m.findtext("name") or ""): m.findtext("value") or ""
        for m in root.iterfind("metric")
    }


def test_the_document_carries_host_and_vm_metrics(tmp_path: Path) -> None:
    """Host: memory and paging from /proc, the node's name, busy CPU seconds; vm: vCPUs
    and memory; the document ends with the blank line vm-dump-metrics waits for."""
    metrics = vhostmd.host_metrics(node="node01", proc=_proc(tmp_path), now=1700000000.0)
    document = vhostmd.render(metrics + vhostmd.vm_metrics(_vmi()))
    assert document.endswith(b"</metrics>\n\n")
    values = _values(document)
    assert values[("host", "HostName")] == "node01"
    assert values[("host", "FreePhysicalMemory")] == "1024000"
    assert values[("host", "UsedVirtualMemory")] == str(60 + 2048000 - 1024000)
    assert values[("host", "PagedInMemory")] == "111"
    assert values[("host", "Time")] == "1700000000"
    assert float(values[("host", "TotalCPUTime")]) > 0
    assert values[("vm", "ResourceProcessorLimit")] == "2"
    assert values[("vm", "ResourceMemoryLimit")] == "128"
    assert values[("vm", "PhysicalMemoryAllocatedToVirtualSystem")] == str(128 * 1024)


def test_only_get_metrics_xml_is_answered() -> None:
    """GET /metrics/XML gets the document; another path or method INVALID REQUEST."""
    assert vhostmd.answer("GET /metrics/XML\n", b"doc") == b"doc"
    assert vhostmd.answer("GET /metrics/XML?x=1", b"doc") == b"doc"
    assert vhostmd.answer("GET /other", b"doc") == vhostmd.INVALID
    assert vhostmd.answer("PUT /metrics/XML", b"doc") == vhostmd.INVALID


async def _reply(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(10):
        return await reader.readuntil(b"\n\n")


async def test_the_handler_dials_the_channel_and_answers(tmp_path: Path) -> None:
    """A fake QEMU end at the pod's channel socket: the handler dials it, answers a good
    request with metrics naming the node and a bad one with INVALID REQUEST; the VMI
    without the device is never dialled."""
    pods = tmp_path / "pods"
    socket = channel_socket(pods, "pod-1")
    socket.parent.mkdir(parents=True)
    dialled: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    with short_path(socket) as path:  # the kubelet's paths pass sun_path's limit
        server = await asyncio.start_unix_server(lambda r, w: dialled.put_nowait((r, w)), path=path)
    plain = channel_socket(pods, "pod-2")
    plain.parent.mkdir(parents=True)
    plain.touch()  # exists, but its VMI does not ask for metrics: never dialled
    vmis = [_vmi(), _vmi(device=False, pod="pod-2")]
    metrics = DownwardMetrics(
        node="node01", pods_dir=pods, vmis=lambda: vmis, interval=0.05,
        proc=_proc(tmp_path), request_gap=0.0,
    )  # fmt: skip
    async with server:
        task = asyncio.create_task(metrics.run())
        try:
            async with asyncio.timeout(10):
                reader, writer = await dialled.get()
            writer.write(b"GET /metrics/XML\n\n")
            assert _values(await _reply(reader))[("host", "HostName")] == "node01"
            writer.write(b"GET /nothing\n\n")
            assert await _reply(reader) == vhostmd.INVALID
            assert list(metrics.serving) == [vmis[0].uid]
            writer.close()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _disk(pods: Path, pod: str) -> Path:
    path = private_dir(pods, pod) / podlayout.DOWNWARD_METRICS_DISK
    path.parent.mkdir(parents=True)
    vhostmddisk.create(path)
    return path


def _complete(disk: Path) -> bytes:
    """The disk's body once no write is under way (a reader retries a busy disk)."""
    for _ in range(10000):
        body = vhostmddisk.read(disk.read_bytes())
        if body is not None:
            return body
    raise AssertionError(f"{disk} stayed busy or corrupt")


async def test_a_metrics_volume_is_rewritten_with_the_document(tmp_path: Path) -> None:
    """A running VMI with a downwardMetrics volume: its pod's vhostmd disk holds the
    node's and the VMI's metrics after a walk."""
    pods = tmp_path / "pods"
    disk = _disk(pods, "pod-1")
    raw = _vmi(device=False).to_dict()
    raw["spec"]["volumes"].append({"name": "metrics", "downwardMetrics": {}})
    vmi = VirtualMachineInstance.from_dict(raw)
    metrics = DownwardMetrics(
        node="node01", pods_dir=pods, vmis=lambda: [vmi], interval=0.01, proc=_proc(tmp_path)
    )
    task = asyncio.create_task(metrics.run())
    try:
        await until(lambda: b"HostName" in _complete(disk), "the disk rewritten")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    body = _complete(disk)
    assert body.endswith(b"</metrics>\n")
    values = _values(body)
    assert values[("host", "HostName")] == "node01"
    assert values[("vm", "ResourceProcessorLimit")] == "2"


def test_the_disk_write_follows_no_symlink(tmp_path: Path) -> None:
    """The pod's vhostmd0 (or its directory) swapped for a symlink: refused, the target
    untouched."""
    target = tmp_path / "host-file"
    target.write_bytes(b"keep")
    for pod, link_dir in (("pod-a", False), ("pod-b", True)):
        private = private_dir(tmp_path / "pods", pod)
        directory = private / podlayout.DOWNWARD_METRICS_DIR
        if link_dir:
            private.mkdir(parents=True)
            elsewhere = tmp_path / "elsewhere"
            elsewhere.mkdir()
            (elsewhere / "vhostmd0").symlink_to(target)
            directory.symlink_to(elsewhere)
        else:
            directory.mkdir(parents=True)
            (directory / "vhostmd0").symlink_to(target)
        with pytest.raises(OSError):
            write_disk(private, b"<metrics/>\n")
    assert target.read_bytes() == b"keep"
