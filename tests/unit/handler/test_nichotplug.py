"""NIC hotplug, virt-handler's part (handler/nichotplug.py): when to ask the launcher,
and status.interfaces following the domain's NICs."""

from __future__ import annotations

from typing import Any

from handler import nichotplug
from shared.model import VirtualMachineInstance
from shared.wire.errors import CommandFailed, ErrorCode
from shared.wire.launcher_api import Method
from shared.wire.nics import InterfacesReply
from tests.unit.handler.fakes import AnsweringLauncher


def _vmi(
    hot_state: str | None = None, *, listed: tuple[str, ...] = ("default",), **status: Any
) -> VirtualMachineInstance:
    hot = {"name": "hot", "bridge": {}} | ({"state": hot_state} if hot_state else {})
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {"domain": {"devices": {"interfaces": [{"name": "default", "masquerade": {}}, hot]}},
                 "networks": [{"name": "default", "pod": {}},
                              {"name": "hot", "multus": {"networkName": "nad"}}]},
        "status": {"phase": "Running",
                   "interfaces": [{"name": n, "ipAddress": "10.0.0.9"} for n in listed]
                   + [{"name": "eth9", "infoSource": "guest-agent"}], **status},
    })  # fmt: skip


def test_wanted_when_the_status_lags_the_hot_nics() -> None:
    """A hot NIC not listed, or an absent one still listed: ask; agreeing: not; nor while
    migrating or before Running."""
    assert nichotplug.wanted(_vmi())
    assert not nichotplug.wanted(_vmi(listed=("default", "hot")))
    assert nichotplug.wanted(_vmi("absent", listed=("default", "hot")))
    assert not nichotplug.wanted(_vmi("absent"))
    assert not nichotplug.wanted(_vmi(migrationState={"targetNode": "n2"}))
    assert not nichotplug.wanted(_vmi(phase="Scheduled"))


def test_status_interfaces_follow_the_domain() -> None:
    """The domain has hot: it is added from the spec, default kept as it was (its
    address), the agent's own entry kept; the domain without hot: it is dropped; an absent
    NIC still present is pending."""
    vmi = _vmi()
    status = nichotplug.with_interfaces(
        vmi, vmi.status, InterfacesReply(present=("default", "hot"))
    )
    assert [(i.name, i.ip_address) for i in status.interfaces] == [
        ("default", "10.0.0.9"), ("eth9", None), ("hot", None)]  # fmt: skip
    gone = _vmi("absent", listed=("default", "hot"))
    status = nichotplug.with_interfaces(gone, gone.status, InterfacesReply(present=("default",)))
    assert [i.name for i in status.interfaces] == ["default", "eth9"]
    assert nichotplug.pending(gone, InterfacesReply(present=("default", "hot")))
    assert not nichotplug.pending(gone, InterfacesReply(present=("default",)))


async def test_apply_hands_over_the_vmi_and_tolerates_an_old_launcher() -> None:
    """sync_interfaces carries the VMI; the reply is parsed; a launcher without the
    command answers None (logged, not retried)."""
    launcher = AnsweringLauncher(
        {"attached": ["hot"], "detached": [], "present": ["default", "hot"]}
    )
    reply = await nichotplug.apply(launcher, _vmi())  # type: ignore[arg-type]
    assert reply == InterfacesReply(attached=("hot",), present=("default", "hot"))
    ((method, args),) = launcher.calls
    assert method is Method.SYNC_INTERFACES and args is not None
    assert args["vmi"]["metadata"]["name"] == "v"
    old = AnsweringLauncher(error=CommandFailed(ErrorCode.UNKNOWN_METHOD, "no such method"))
    assert await nichotplug.apply(old, _vmi()) is None  # type: ignore[arg-type]
