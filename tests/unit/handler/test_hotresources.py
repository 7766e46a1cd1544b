"""The handler's part of CPU and memory hotplug: when it asks the launcher, and the status
it writes (currentCPUTopology, memory, HotVCPUChange / HotMemoryChange while the guest lags)."""

from __future__ import annotations

from typing import Any

import pytest

from handler import hotresources
from handler.errors import SyncError
from handler.hotresources import Outcome
from shared.model import VirtualMachineInstance
from shared.wire.errors import ErrorCode, RemoteError
from shared.wire.resources import HotplugResourcesArgs, ResourcesReply

GIB_KIB = 1024 * 1024
NOW = "2026-11-27T08:00:00Z"


def vmi(sockets: int = 2, guest: str = "1536Mi", status: dict[str, Any] | None = None,
        max_guest: str | None = "4Gi") -> VirtualMachineInstance:  # fmt: skip
    memory = {"guest": guest} | ({"maxGuest": max_guest} if max_guest else {})
    spec = {"domain": {"cpu": {"sockets": sockets, "maxSockets": 4}, "memory": memory}}
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a", "namespace": "n", "uid": "u"}, "spec": spec,
         "status": {"phase": "Running", **(status or {})}}
    )  # fmt: skip


DONE = {"currentCPUTopology": {"sockets": 2}, "memory": {"guestCurrent": "1536Mi"}}


def test_asks_while_the_status_lags_the_spec() -> None:
    """No status yet, or sockets / memory behind the spec: ask for the spec's; caught up,
    migrating, or no ceilings in the spec: nothing to ask."""
    want = HotplugResourcesArgs(vcpus=2, memory_kib=GIB_KIB + 512 * 1024)
    assert hotresources.wanted(vmi()) == want
    assert hotresources.wanted(vmi(status={**DONE, "currentCPUTopology": {"sockets": 1}})) == want
    assert hotresources.wanted(vmi(status=DONE)) is None
    migrating = {
        **DONE,
        "currentCPUTopology": {"sockets": 1},
        "migrationState": {"completed": False},
    }
    assert hotresources.wanted(vmi(status=migrating)) is None
    plain = VirtualMachineInstance.from_dict({"spec": {"domain": {"cpu": {"sockets": 2}}}})
    assert hotresources.wanted(plain) is None


def test_status_while_plugging_and_once_done() -> None:
    """The guest has the vCPUs but is still plugging memory: currentCPUTopology 2 sockets,
    memory current below requested and HotMemoryChange True (look again soon); once all is
    plugged the condition goes."""
    v = vmi()
    half = ResourcesReply(vcpus=2, max_vcpus=4, memory_boot_kib=GIB_KIB,
                          memory_requested_kib=GIB_KIB + 524288,
                          memory_current_kib=GIB_KIB + 262144)  # fmt: skip
    status = hotresources.with_resources(v, v.status, Outcome(reply=half), now=NOW)
    assert status.current_cpu_topology is not None and status.current_cpu_topology.sockets == 2
    assert status.memory is not None
    assert (status.memory.guest_at_boot, status.memory.guest_current) == ("1Gi", "1280Mi")
    assert status.memory.guest_requested == "1536Mi"
    assert status.condition_is_true("HotMemoryChange")
    assert status.condition("HotVCPUChange") is None
    assert hotresources.settling(Outcome(reply=half), status)
    done = ResourcesReply(vcpus=2, max_vcpus=4, memory_boot_kib=GIB_KIB,
                          memory_requested_kib=GIB_KIB + 524288,
                          memory_current_kib=GIB_KIB + 524288)  # fmt: skip
    after = hotresources.with_resources(v, status, Outcome(reply=done), now=NOW)
    assert after.condition("HotMemoryChange") is None
    assert after.memory is not None and after.memory.guest_current == "1536Mi"


def test_a_refusal_is_a_condition_not_a_failure() -> None:
    """The launcher refused: both conditions True with its message; the phase stays."""
    v = vmi()
    status = hotresources.with_resources(
        v, v.status, Outcome(reply=None, refused="guest memory is not unplugged live"), now=NOW
    )
    cpu, memory = status.condition("HotVCPUChange"), status.condition("HotMemoryChange")
    assert cpu is not None and memory is not None and cpu.is_true
    assert memory.message == "guest memory is not unplugged live"
    assert str(status.phase) == "Running"
    assert not hotresources.settling(Outcome(reply=None, refused="x"), status)


class FakeLauncher:
    """Answers hotplug_resources with a reply, or raises the given error."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, Any]] = []

    async def call(self, method: str, args: Any = None) -> Any:
        self.asked.append((method, args))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_apply_asks_the_launcher_and_keeps_refusals_apart() -> None:
    """The reply is decoded; an out-of-bounds refusal or a launcher without the command is
    an outcome naming why; a libvirt failure is a sync error (retried)."""
    args = HotplugResourcesArgs(vcpus=2, memory_kib=GIB_KIB)
    reply = ResourcesReply(vcpus=2, max_vcpus=4, memory_boot_kib=GIB_KIB)
    ok = FakeLauncher(reply.to_wire())
    assert await hotresources.apply(ok, args) == Outcome(reply=reply)  # type: ignore[arg-type]
    assert ok.asked == [("hotplug_resources", args.to_wire())]
    for code in (ErrorCode.INVALID_VMI, ErrorCode.UNKNOWN_METHOD):
        refused = FakeLauncher(RemoteError(code, "no"))
        outcome = await hotresources.apply(refused, args)  # type: ignore[arg-type]
        assert outcome.reply is None and outcome.refused == "no"
    with pytest.raises(SyncError):
        await hotresources.apply(FakeLauncher(RemoteError(ErrorCode.LIBVIRT, "x")), args)  # type: ignore[arg-type]
