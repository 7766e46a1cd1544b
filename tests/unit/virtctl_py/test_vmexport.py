"""virtctl-py vmexport: KubeVirt's flags parse, the source and the link are chosen as
KubeVirt's virtctl chooses them, and the pod port-forward channel framing is Kubernetes'."""

from __future__ import annotations

import argparse
from typing import Any

import aiohttp
import pytest

from shared.model.export import ExportFormat, VirtualMachineExport
from virtctl_py import cli
from virtctl_py.errors import CliError
from virtctl_py.podforward import ChannelSocket
from virtctl_py.vmexport import _link, source_of


def args(*argv: str) -> argparse.Namespace:
    return cli.build().parse_args(["vmexport", *argv])


def test_kubevirt_flags_parse() -> None:
    """The flags KubeVirt's virtctl documents for download parse, gzip by default."""
    ns = args("download", "e", "--vm=v", "--output=o.img", "--port-forward", "--volume=d")
    assert (ns.action, ns.name, ns.vm, ns.output, ns.volume) == ("download", "e", "v", "o.img", "d")
    assert ns.format == "gzip" and ns.port_forward
    assert args("download", "e", "--output=o", "--format=raw").format == "raw"


def test_source_is_exactly_one_of_pvc_vm_or_snapshot() -> None:
    """--pvc → a core claim, --vm → kubevirt.io, --snapshot → snapshot.kubevirt.io; none or
    two: a usage error."""
    assert source_of(args("create", "e", "--pvc=c")) == {
        "apiGroup": "", "kind": "PersistentVolumeClaim", "name": "c"
    }  # fmt: skip
    assert source_of(args("create", "e", "--vm=v"))["apiGroup"] == "kubevirt.io"
    for bad in (("create", "e"), ("create", "e", "--vm=v", "--pvc=c")):
        with pytest.raises(CliError, match="exactly one"):
            source_of(args(*bad))
    assert source_of(args("create", "e", "--snapshot=s")) == {
        "apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot", "name": "s"
    }  # fmt: skip


def _export(volumes: list[dict[str, Any]]) -> VirtualMachineExport:
    return VirtualMachineExport.from_dict(
        {
            "metadata": {"name": "e"},
            "status": {"links": {"internal": {"cert": "CA", "volumes": volumes}}},
        }
    )


def _vol(name: str) -> dict[str, Any]:
    return {"name": name, "formats": [
        {"format": "raw", "url": f"https://h/volumes/{name}/disk.img"},
        {"format": "gzip", "url": f"https://h/volumes/{name}/disk.img.gz"}]}  # fmt: skip


def test_link_picks_the_volume_and_format() -> None:
    """One volume needs no --volume; several need it (naming them); the CA comes along."""
    assert _link(_export([_vol("a")]), None, ExportFormat.GZIP) == (
        "https://h/volumes/a/disk.img.gz", "CA", ExportFormat.GZIP
    )  # fmt: skip
    two = _export([_vol("a"), _vol("b")])
    assert _link(two, "b", ExportFormat.RAW)[0] == "https://h/volumes/b/disk.img"
    with pytest.raises(CliError, match=r"--volume.*a, b"):
        _link(two, None, ExportFormat.RAW)
    with pytest.raises(CliError, match="no volume 'c'"):
        _link(two, "c", ExportFormat.RAW)


class FakeWS:
    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.sent: list[bytes] = []

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage:
        if not self.frames:
            return aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, None, None)
        return aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, self.frames.pop(0), None)

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        self.sent.append(data)


async def test_channel_framing_strips_ports_and_tags_data() -> None:
    """Each channel's first frame starts with the port (2 bytes), dropped; data frames lose
    their channel byte; an error-channel text ends as an ERROR message; sends go on channel 0."""
    port = (8443).to_bytes(2, "little")
    ws = FakeWS([b"\x00" + port, b"\x01" + port, b"\x00hello", b"\x01refused"])
    sock = ChannelSocket(ws)  # type: ignore[arg-type]
    first = await sock.receive()
    assert first.type is aiohttp.WSMsgType.BINARY and first.data == b"hello"
    err = await sock.receive()
    assert err.type is aiohttp.WSMsgType.ERROR and err.data == "refused"
    assert (await sock.receive()).type is aiohttp.WSMsgType.CLOSE
    await sock.send_bytes(b"GET /")
    assert ws.sent == [b"\x00GET /"]
