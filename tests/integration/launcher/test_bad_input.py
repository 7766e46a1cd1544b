"""Hostile and invalid input against a real launcher: typed errors, no crash, no libvirt call."""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import pytest

from shared.wire.client import RpcClient, Tier
from shared.wire.errors import CommandFailed, UnknownMethod
from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import Launcher, call, tiny_vmi

pytestmark = pytest.mark.integration


def _defined_domains(launcher: Launcher) -> str:
    return launcher.virsh("list", "--all", "--name").stdout.strip()


def _with_volume(volume: dict[str, Any]) -> dict[str, Any]:
    vmi = tiny_vmi(name="idle")
    vmi["spec"]["volumes"][0] = {"name": "containerdisk", **volume}
    return vmi


def _renamed_container_disk(name: str, source: dict[str, Any]) -> dict[str, Any]:
    """A containerDisk volume whose copy the pod does not have (no init container ran)."""
    vmi = tiny_vmi(name="idle")
    vmi["spec"]["volumes"][0] = {"name": name, "containerDisk": source}
    vmi["spec"]["domain"]["devices"]["disks"][0]["name"] = name
    return vmi


def _with_memory(guest: str) -> dict[str, Any]:
    vmi = tiny_vmi(name="idle")
    vmi["spec"]["domain"]["memory"]["guest"] = guest
    vmi["spec"]["domain"]["resources"]["requests"]["memory"] = guest
    return vmi


@pytest.mark.parametrize(
    ("vmi", "code", "field"),
    [
        pytest.param(_with_memory("-128Mi"), "invalid_vmi", "spec.domain.memory.guest", id="negative-memory"),
        pytest.param(_with_memory("64Pi"), "invalid_vmi", "spec.domain.memory.guest", id="absurd-memory"),
        pytest.param(
            _with_volume({"hostDisk": {"path": "/etc/../etc/shadow", "type": "Disk"}}),
            "invalid_vmi", "spec.volumes[0].hostDisk.path", id="hostdisk-dotdot",
        ),
        pytest.param(
            _with_volume({"hostDisk": {"path": "/etc/shadow", "type": "Disk"}}),
            "invalid_vmi", "spec.volumes[0].hostDisk.path", id="hostdisk-in-etc",
        ),
        pytest.param(
            _with_volume({"hostDisk": {"path": "/var/data/none.img", "type": "Disk"}}),
            "disk_error", "", id="hostdisk-not-mounted",
        ),
        pytest.param(
            _renamed_container_disk("nope", {"image": "registry.local/nope:v1"}),
            "image_not_found", "", id="container-disk-not-copied",
        ),
        pytest.param(
            {**tiny_vmi(name="idle"), "spec": {**tiny_vmi()["spec"], "volumes": []}},
            "invalid_vmi", "spec.domain.devices.disks[0].name", id="disk-without-volume",
        ),
    ],
)  # fmt: skip
async def test_invalid_vmis_get_typed_errors(
    idle: Launcher, vmi: dict[str, Any], code: str, field: str
) -> None:
    """Each invalid VMI gets its typed error, naming the field where validation catches it,
    and no domain is ever defined."""
    vmi["metadata"]["uid"] = idle.vmi["metadata"]["uid"]
    with pytest.raises(CommandFailed) as info:
        await call(idle, Method.SYNC, {"vmi": vmi})
    assert info.value.code == code, info.value
    if field:
        assert field in [f["path"] for f in info.value.details["fields"]], info.value.details
    assert _defined_domains(idle) == ""


async def test_xml_metacharacters_in_names_are_refused(idle: Launcher) -> None:
    """A name full of XML metacharacters is an invalid name, reported, never rendered."""
    vmi = tiny_vmi(name="idle")
    vmi["metadata"]["uid"] = idle.vmi["metadata"]["uid"]
    vmi["spec"]["volumes"][1]["name"] = "</name><evil attr='x'>&"
    with pytest.raises(CommandFailed) as info:
        await call(idle, Method.SYNC, {"vmi": vmi})
    assert info.value.code == "invalid_vmi"
    assert "spec.volumes[1].name" in [f["path"] for f in info.value.details["fields"]]
    assert _defined_domains(idle) == ""


async def _raw(path: Path, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(payload)
    await writer.drain()
    writer.write_eof()
    async with asyncio.timeout(10):
        data = await reader.read()
    writer.close()
    return data


async def test_garbage_on_the_socket(idle: Launcher) -> None:
    """Random bytes, half frames, oversized frames and non-maps do not hurt the launcher."""
    big = struct.pack(">I", 64 * 1024 * 1024) + b"x" * 100
    body = msgpack.packb(["not", "a", "map"])
    payloads = [os.urandom(n) for n in (1, 3, 4, 100, 5000)] + [
        b"\x00\x00\x01\x00half",
        big,
        struct.pack(">I", len(body)) + body,
    ]
    replies = await asyncio.gather(*(_raw(idle.socket, p) for p in payloads))
    assert b"frame_too_large" in replies[6]
    assert b"bad_frame" in replies[7]
    assert await call(idle, Method.PING) == "pong"


async def test_unknown_method(idle: Launcher) -> None:
    """An unknown method gets UnknownMethod; the connection keeps working."""
    async with RpcClient.connect(idle.socket) as client:
        with pytest.raises(UnknownMethod):
            await client.call("format_host_disk", {}, tier=Tier.SHORT)
        assert await client.call("ping", {}, tier=Tier.SHORT) == "pong"


async def test_many_concurrent_clients(idle: Launcher) -> None:
    """Sixty clients at once, each with several calls, are all answered."""

    async def one() -> list[Any]:
        async with RpcClient.connect(idle.socket) as client:
            return await asyncio.gather(
                *(client.call("ping", {}, tier=Tier.SHORT) for _ in range(5))
            )

    results = await asyncio.gather(*(one() for _ in range(60)))
    assert results == [["pong"] * 5] * 60


async def test_agent_not_connected_without_domain(idle: Launcher) -> None:
    """Agent calls with no domain fail with domain_not_found, not a crash."""
    with pytest.raises(CommandFailed) as info:
        await call(idle, Method.GUEST_PING)
    assert info.value.code == "domain_not_found"


def test_launcher_reports_libvirt_start_failure() -> None:
    """When libvirtd cannot start, the launcher exits non-zero with a one-line reason."""
    root = Path(tempfile.mkdtemp(prefix="kvl", dir="/tmp"))
    launcher = Launcher(root=root, vmi=tiny_vmi(), extra_args=("--libvirtd", "/bin/false"))
    try:
        launcher.start(wait_ready=False)
        assert launcher.process is not None
        code = launcher.process.wait(30)
        last = launcher.logs().strip().splitlines()[-1]
    finally:
        launcher.kill()
        shutil.rmtree(root, ignore_errors=True)
    assert code == 2
    assert last.startswith("virt-launcher-py: libvirtd exited"), last


async def test_a_command_loaded_on_demand_answers_from_its_group(idle: Launcher) -> None:
    """The commands no start needs (launcher.ondemand) are listed by ``info`` from the
    start, and the first of them loads its group on a real launcher: BackupStatus with no
    backup started is refused with the backups' typed error; the launcher serves on."""
    async with RpcClient.connect(idle.socket) as client:
        info = await client.call("info", {}, tier=Tier.SHORT)
    assert {str(Method.BACKUP_BEGIN), str(Method.SYNC_INTERFACES)} <= set(info["methods"])
    with pytest.raises(CommandFailed) as failed:
        await call(idle, Method.BACKUP_STATUS)
    assert failed.value.code == "libvirt_error", failed.value
    assert "no backup was started" in failed.value.message
    assert await call(idle, Method.PING) == "pong"
