"""The launcher boots the real guest and serves every command against it (shared VM)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
from typing import Any

import pytest

from shared.wire.errors import CommandFailed, InvalidArgument
from shared.wire.launcher_api import Method
from tests.integration.launcher.conftest import SHARED_BLOCK_SIZE
from tests.integration.launcher.harness import BOOT_MARKER, TICK, Launcher, call, wait_for

pytestmark = pytest.mark.integration


async def test_guest_boots_and_prints_cloud_init(booted: Launcher) -> None:
    """The console shows the boot marker and the user-data from the cidata ISO."""
    serial = await wait_for(
        lambda: "KUBEVIRT-PY-USERDATA-END" in booted.serial() and booted.serial(),
        timeout=60,
        what="user-data on the console",
        last=booted.serial,
    )
    assert BOOT_MARKER in serial
    begin = serial.index("KUBEVIRT-PY-USERDATA-BEGIN")
    assert "hello: from-kubevirt-py" in serial[begin : serial.index("KUBEVIRT-PY-USERDATA-END")]


async def test_domain_running_in_libvirt(booted: Launcher) -> None:
    """get_domain says Running, and libvirt's own view (virsh) agrees."""
    status = await call(booted, Method.GET_DOMAIN)
    assert (status["state"], status["vmiUid"]) == ("Running", booted.vmi["metadata"]["uid"])
    out = subprocess.run(
        ["virsh", "-c", booted.libvirt_uri, "domstate", status["name"]],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "running"


async def test_generated_xml_is_valid(
    booted: Launcher, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The domain XML the launcher defined passes virt-xml-validate."""
    xml = subprocess.run(
        ["virsh", "-c", booted.libvirt_uri, "dumpxml", "--inactive", "default_shared"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    path = tmp_path_factory.mktemp("xml") / "domain.xml"
    path.write_text(xml)
    subprocess.run(["virt-xml-validate", str(path), "domain"], check=True, capture_output=True)


async def test_guest_agent_queries(booted: Launcher) -> None:
    """guest ping, OS info, users and filesystems come from the real qemu-ga."""
    assert await call(booted, Method.GUEST_PING) is True
    info = await call(booted, Method.GET_GUEST_INFO)
    assert info["os"]["kernelRelease"].startswith("6.")
    assert info["guestAgentVersion"]
    users = await call(booted, Method.GET_USERS)
    assert isinstance(users["items"], list)
    filesystems = await call(booted, Method.GET_FILESYSTEMS)
    assert isinstance(filesystems["items"], list)


async def test_pause_and_unpause(booted: Launcher) -> None:
    """Pause stops the guest's ticks; unpause resumes them. Each, sent twice, answers the
    second time as the first (libvirt itself refuses one of the two repeats)."""
    assert (await call(booted, Method.UNPAUSE))["state"] == "Running"
    paused = await call(booted, Method.PAUSE)
    assert (paused["state"], paused["reason"]) == ("Paused", "User")
    assert await call(booted, Method.PAUSE) == paused
    ticks = booted.serial().count(TICK)
    await asyncio.sleep(2.5)
    assert booted.serial().count(TICK) == ticks, "guest kept ticking while paused"
    resumed = await call(booted, Method.UNPAUSE)
    assert resumed["state"] == "Running"
    assert await call(booted, Method.UNPAUSE) == resumed
    await wait_for(
        lambda: booted.serial().count(TICK) > ticks, timeout=10, what="ticks after unpause"
    )


async def test_domain_stats(booted: Launcher) -> None:
    """Stats report cpu time, vCPUs, memory and the guest's block devices under the VMI's
    disk names; the masquerade interface's counters come from the guest agent once it is
    connected, under the VMI's interface name."""
    stats = await call(booted, Method.GET_DOMAIN_STATS)
    assert stats["cpu_time_ns"] > 0
    assert stats["memory_actual_kib"] == 128 * 1024
    assert {b["name"] for b in stats["block"]} == {"containerdisk", "cloudinit"}
    assert [v["id"] for v in stats["vcpu"]] == [0]

    async def agent_counters() -> bool:
        net = (await call(booted, Method.GET_DOMAIN_STATS))["net"]
        return [n["name"] for n in net] == ["default"] and net[0]["rx_packets"] > 0

    await wait_for(agent_counters, timeout=60, what="the interface's counters from the agent")


async def test_sync_is_idempotent(booted: Launcher) -> None:
    """A second Sync of the same VMI changes nothing and reports Running."""
    status = await call(booted, Method.SYNC, {"vmi": booted.vmi})
    assert status["state"] == "Running"


async def test_sync_for_another_vmi_is_refused(booted: Launcher) -> None:
    """Sync with a different uid is refused with invalid_vmi; the running guest is untouched."""
    other = dict(booted.vmi, metadata={**booted.vmi["metadata"], "uid": "other"})
    with pytest.raises(CommandFailed) as info:
        await call(booted, Method.SYNC, {"vmi": other})
    assert info.value.code == "invalid_vmi"
    assert (await call(booted, Method.GET_DOMAIN))["state"] == "Running"


async def test_wrong_argument_types(booted: Launcher) -> None:
    """Arguments of the wrong shape get invalid_argument naming the field."""
    with pytest.raises(InvalidArgument) as info:
        await call(booted, Method.SYNC, {"vmi": "not-a-map"})
    assert info.value.field == "vmi"
    with pytest.raises(InvalidArgument):
        await call(booted, Method.PAUSE, {"unexpected": 1})


def _qemu(launcher: Launcher, what: str, command: dict[str, Any]) -> Any:
    """One QMP (qemu-monitor-command) or guest agent (qemu-agent-command) command."""
    done = launcher.virsh(what, "default_shared", json.dumps(command))
    return json.loads(done.stdout)["return"]


def _guest_cat(launcher: Launcher, path: str) -> str:
    """`cat path` in the guest through qemu-ga's guest-exec; its output."""
    args = {"path": "/bin/sh", "arg": ["-c", f"cat {path}"], "capture-output": True}
    pid = _qemu(launcher, "qemu-agent-command", {"execute": "guest-exec", "arguments": args})
    status: dict[str, Any] = {}
    for _ in range(100):
        status = _qemu(launcher, "qemu-agent-command",
                       {"execute": "guest-exec-status", "arguments": {"pid": pid["pid"]}})  # fmt: skip
        if status.get("exited"):
            break
        time.sleep(0.2)
    assert status.get("exitcode") == 0, status
    return base64.b64decode(status.get("out-data", "")).decode().strip()


async def test_discard_granularity_reaches_qemu_and_the_guest(booted: Launcher) -> None:
    """blockSize.custom.discardGranularity (a qemu:override of the disk's frontend, which
    libvirt 9.0's <blockio> lacks): QEMU's virtio-blk device has the property, and the
    guest's kernel reports it for vda beside the logical and physical sizes."""
    want = SHARED_BLOCK_SIZE["discardGranularity"]
    qom = {"path": "/machine/peripheral/ua-containerdisk", "property": "discard_granularity"}
    assert _qemu(booted, "qemu-monitor-command", {"execute": "qom-get", "arguments": qom}) == want
    queue = "/sys/block/vda/queue"
    assert _guest_cat(booted, f"{queue}/discard_granularity") == str(want)
    assert _guest_cat(booted, f"{queue}/logical_block_size") == "512"
    assert _guest_cat(booted, f"{queue}/physical_block_size") == "4096"
