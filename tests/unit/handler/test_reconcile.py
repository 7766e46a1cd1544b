"""The reconcile loop against fake launchers and an in-memory API."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from pathlib import Path

import pytest

from handler.launchers import LauncherState
from handler.reconcile_deps import ReconcileOptions
from shared.model import ConditionStatus, VMIConditionType, VMIPhase
from shared.wire.domain import DomainState
from shared.wire.errors import CommandFailed, ErrorCode
from shared.wire.launcher_api import Method
from tests.unit.handler.fakes import GUEST_INTERFACES, vmi_dict
from tests.unit.handler.rig import ACPI_INTERVAL, MISSING_TIMEOUT, Rig


async def running(rig: Rig, **launcher: object) -> str:
    """A VMI taken from Scheduled to Running by one reconcile."""
    key = rig.put(vmi_dict())
    rig.launcher(key, **launcher)
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.RUNNING
    rig.informer_sync()
    return key


def cond(rig: Rig, key: str, type_: str) -> tuple[object, object] | None:
    found = rig.api.vmi(key).status.condition(type_)
    return None if found is None else (found.status, found.reason)


async def test_scheduled_vmi_reaches_running_in_one_write() -> None:
    """Sync is sent with the VMI; one status write carries Running and its conditions."""
    rig = Rig()
    key = rig.put(vmi_dict())
    launcher = rig.launcher(key)
    vmi = await rig.process(key)
    assert launcher.calls == [Method.SYNC]
    assert rig.api.status_writes[key] == 1
    assert vmi.status.phase is VMIPhase.RUNNING
    assert [t.phase for t in vmi.status.phase_transition_timestamps] == ["Running"]
    assert cond(rig, key, VMIConditionType.READY) == (ConditionStatus.TRUE, None)
    assert cond(rig, key, VMIConditionType.LIVE_MIGRATABLE) == (ConditionStatus.TRUE, None)
    assert [i.name for i in vmi.status.interfaces] == ["default"]
    assert vmi.status.node_name == "node01" and vmi.status.active_pods == {"pod-1": "node01"}


async def test_reconcile_after_own_write_is_a_no_op_even_when_the_informer_lags() -> None:
    """The handler reads what it wrote while the cache still shows the older object."""
    rig = Rig()
    key = rig.put(vmi_dict())
    launcher = rig.launcher(key)
    await rig.process(key)
    await rig.process(key)  # informer not synced: the store still says Scheduled
    rig.informer_sync()
    await rig.process(key)
    assert launcher.calls == [Method.SYNC]
    assert rig.api.status_writes[key] == 1
    assert rig.api.conflicts == 0


async def test_agent_connection_adds_condition_guest_os_info_and_interfaces_in_one_write() -> None:
    """AgentConnected, guestOSInfo and the agent's interface facts arrive together: the
    second and last write; a settled guest is not asked again."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    rig.push(dataclasses.replace(launcher.domain, agent_connected=True), "AgentConnected")
    vmi = await rig.process(key)
    rig.informer_sync()
    await rig.process(key)
    assert cond(rig, key, VMIConditionType.AGENT_CONNECTED) == (ConditionStatus.TRUE, None)
    assert vmi.status.guest_os_info is not None and vmi.status.guest_os_info.name == "BusyBox"
    assert launcher.count(Method.GET_GUEST_INFO) == 1
    (iface, extra) = vmi.status.interfaces
    assert (iface.name, iface.interface_name) == ("default", "eth0")
    assert iface.info_source == "domain, guest-agent"
    assert (extra.interface_name, extra.info_source) == ("docker0", "guest-agent")
    await rig.process(key)
    assert launcher.count(Method.GET_INTERFACES) == 1
    assert rig.api.status_writes[key] == 2


async def test_settled_guest_interfaces_are_reread_each_refresh_interval() -> None:
    """Once every interface has an address the agent is asked again only after the refresh
    interval (the revisit is scheduled for then); a changed address is then written (here
    on an interface only the guest has; a masquerade one keeps the pod's address)."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    rig.push(dataclasses.replace(launcher.domain, agent_connected=True), "AgentConnected")
    await rig.process(key)
    rig.informer_sync()
    refresh = ReconcileOptions(node="n", pods_dir=Path("/")).guest_interfaces_refresh
    assert (key, refresh) in rig.queue.after
    rig.advance(refresh / 2)
    await rig.process(key)
    assert launcher.count(Method.GET_INTERFACES) == 1
    moved = copy.deepcopy(dict(GUEST_INTERFACES))
    moved["items"][1]["ipAddresses"] = ["172.17.0.9"]
    launcher.interfaces = moved
    rig.advance(refresh / 2)
    vmi = await rig.process(key)
    assert launcher.count(Method.GET_INTERFACES) == 2
    assert vmi.status.interfaces[1].ip_address == "172.17.0.9"


async def test_waiting_launcher_is_left_alone() -> None:
    """Until launcher-sock exists nothing is called and nothing is written."""
    rig = Rig()
    key = rig.put(vmi_dict())
    launcher = rig.launcher(key, state=LauncherState.WAITING)
    vmi = await rig.process(key)
    assert launcher.calls == []
    assert rig.api.status_writes[key] == 0
    assert vmi.status.phase is VMIPhase.SCHEDULED


async def test_deletion_resends_acpi_and_kills_a_guest_that_ignores_it_at_grace_end() -> None:
    """ACPI every interval while the grace period runs, Kill at its end, then Succeeded."""
    rig = Rig()
    key = await running(rig, obeys_acpi=False)
    launcher = rig.launcher(key)
    rig.api.delete_vmi(key)
    rig.informer_sync()
    vmi = await rig.process(key)
    assert launcher.count(Method.SHUTDOWN) == 1
    assert all(delay <= ACPI_INTERVAL for _, delay in rig.queue.after)
    assert cond(rig, key, VMIConditionType.READY) == (ConditionStatus.FALSE, "PodTerminating")
    rig.advance(1)
    await rig.process(key)
    assert launcher.count(Method.SHUTDOWN) == 1  # not due yet
    rig.advance(ACPI_INTERVAL)
    await rig.process(key)
    assert launcher.count(Method.SHUTDOWN) == 2
    rig.advance(vmi.spec.grace_period_seconds)
    rig.informer_sync()
    vmi = await rig.process(key)
    assert launcher.count(Method.KILL) == 1
    assert vmi.status.phase is VMIPhase.SUCCEEDED
    assert launcher.calls[-1] is Method.DELETE
    assert vmi.uid in rig.pool.released


async def test_deletion_of_a_guest_that_obeys_acpi_succeeds_without_kill() -> None:
    """The guest powers off on the first ACPI request."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    rig.api.delete_vmi(key)
    rig.informer_sync()
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.SUCCEEDED
    assert launcher.count(Method.KILL) == 0
    assert launcher.calls[-1] is Method.DELETE


async def test_guest_that_powers_itself_off_succeeds() -> None:
    """Shutoff(Shutdown) without a stop request: Succeeded, then the launcher is deleted."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    rig.push(dataclasses.replace(launcher.domain, state=DomainState.SHUTOFF, reason="Shutdown"))
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.SUCCEEDED
    assert cond(rig, key, VMIConditionType.READY) == (ConditionStatus.FALSE, "GuestNotRunning")
    assert launcher.calls[-1] is Method.DELETE


@pytest.mark.parametrize(
    ("state", "reason", "failure"),
    [
        pytest.param(DomainState.SHUTOFF, "Failed", "QemuDied", id="qemu-died"),
        pytest.param(DomainState.SHUTOFF, "Destroyed", "DomainDestroyed", id="destroyed-unasked"),
        pytest.param(DomainState.CRASHED, "Panicked", "GuestCrashed", id="crashed"),
    ],
)
async def test_domain_that_dies_fails_the_vmi_with_a_reason(
    state: DomainState, reason: str, failure: str
) -> None:
    """A domain that ends without being asked to makes the VMI Failed, saying why."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    rig.push(dataclasses.replace(launcher.domain, state=state, reason=reason))
    vmi = await rig.process(key)
    assert (vmi.status.phase, vmi.status.reason) == (VMIPhase.FAILED, failure)


async def test_launcher_gone_fails_the_vmi() -> None:
    """A launcher whose socket vanished or refuses connections: Failed(LauncherDied)."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    launcher.state = LauncherState.GONE
    vmi = await rig.process(key)
    assert (vmi.status.phase, vmi.status.reason) == (VMIPhase.FAILED, "LauncherDied")
    assert Method.DELETE not in launcher.calls
    assert vmi.uid in rig.pool.released


async def test_launcher_that_exits_while_stopping_ends_the_vmi_well() -> None:
    """Deleted VMI whose launcher stopped the guest and exited before we saw it: Succeeded."""
    rig = Rig()
    key = await running(rig)
    rig.api.delete_vmi(key)
    rig.informer_sync()
    rig.launcher(key).state = LauncherState.GONE
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.SUCCEEDED


async def test_running_vmi_whose_launcher_never_appears_fails_after_the_timeout() -> None:
    """Handler restarted, no socket for a Running VMI: re-checked, then Failed."""
    rig = Rig()
    key = await running(rig)
    rig.pool.launchers.clear()
    rig.reconciler = rig.fresh_reconciler()
    launcher = rig.launcher(key, state=LauncherState.WAITING, since=rig.now)
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.RUNNING
    assert (key, MISSING_TIMEOUT) in rig.queue.after
    rig.advance(MISSING_TIMEOUT)
    vmi = await rig.process(key)
    assert (vmi.status.phase, vmi.status.reason) == (VMIPhase.FAILED, "LauncherDied")
    assert launcher.calls == []


async def test_invalid_spec_fails_the_vmi_without_retrying() -> None:
    """The launcher refuses the VMI: Failed(InvalidSpec), Synchronized says why."""
    rig = Rig()
    key = rig.put(vmi_dict())
    launcher = rig.launcher(key)
    launcher.fail[Method.SYNC] = CommandFailed(ErrorCode.INVALID_VMI, "spec.domain.cpu: bad")
    vmi = await rig.process(key)
    assert (vmi.status.phase, vmi.status.reason) == (VMIPhase.FAILED, "InvalidSpec")
    assert cond(rig, key, VMIConditionType.SYNCHRONIZED) == (ConditionStatus.FALSE, "InvalidSpec")
    assert rig.queue.rate_limited == []


async def test_transient_sync_failure_is_reported_and_retried() -> None:
    """A libvirt error: Synchronized=False(LibvirtError), requeued; cleared once Sync works."""
    rig = Rig()
    key = rig.put(vmi_dict())
    launcher = rig.launcher(key)
    launcher.fail[Method.SYNC] = CommandFailed(ErrorCode.LIBVIRT, "cannot start")
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.SCHEDULED
    assert cond(rig, key, VMIConditionType.SYNCHRONIZED) == (ConditionStatus.FALSE, "LibvirtError")
    assert rig.queue.rate_limited == [key]
    del launcher.fail[Method.SYNC]
    rig.informer_sync()
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.RUNNING
    assert cond(rig, key, VMIConditionType.SYNCHRONIZED) is None


async def test_restarted_handler_refills_its_cache_without_writing() -> None:
    """After a restart, a Running VMI's domain is read back; the status is already right."""
    rig = Rig()
    key = await running(rig)
    writes = rig.api.status_writes[key]
    rig.domains.forget(rig.api.vmi(key).uid)
    rig.reconciler = rig.fresh_reconciler()
    launcher = rig.launcher(key)
    launcher.calls.clear()
    await rig.process(key)
    assert launcher.calls == [Method.GET_DOMAIN]
    assert rig.api.status_writes[key] == writes


async def test_running_vmi_whose_launcher_lost_its_domain_fails() -> None:
    """get_domain answers domain_not_found for a Running VMI: Failed(DomainVanished)."""
    rig = Rig()
    key = await running(rig)
    rig.domains.forget(rig.api.vmi(key).uid)
    rig.launcher(key).domain = None
    vmi = await rig.process(key)
    assert (vmi.status.phase, vmi.status.reason) == (VMIPhase.FAILED, "DomainVanished")


async def test_paused_domain_is_reflected_and_cleared() -> None:
    """Paused(User) → Paused=True(PausedByUser), Ready=False; resumed → back to Ready."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    rig.push(dataclasses.replace(launcher.domain, state=DomainState.PAUSED, reason="User"))
    await rig.process(key)
    rig.informer_sync()
    assert cond(rig, key, VMIConditionType.PAUSED) == (ConditionStatus.TRUE, "PausedByUser")
    assert cond(rig, key, VMIConditionType.READY) == (ConditionStatus.FALSE, "Paused")
    rig.push(dataclasses.replace(launcher.domain, state=DomainState.RUNNING, reason="Unpaused"))
    vmi = await rig.process(key)
    assert cond(rig, key, VMIConditionType.PAUSED) is None
    assert cond(rig, key, VMIConditionType.READY) == (ConditionStatus.TRUE, None)
    assert vmi.status.phase is VMIPhase.RUNNING


async def test_paused_guest_is_written_without_asking_its_agent() -> None:
    """A Paused event's reconcile asks the launcher nothing about the guest (its agent
    cannot answer while paused, even when its interfaces are not settled yet) and keeps
    the guest facts from before; once resumed, the agent is asked again."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    unsettled = copy.deepcopy(dict(GUEST_INTERFACES))
    unsettled["items"][0]["ipAddresses"] = []
    launcher.interfaces = unsettled
    rig.push(dataclasses.replace(launcher.domain, agent_connected=True), "AgentConnected")
    await rig.process(key)
    rig.informer_sync()
    asked = launcher.count(Method.GET_INTERFACES)
    paused = dataclasses.replace(launcher.domain, agent_connected=True)
    rig.push(dataclasses.replace(paused, state=DomainState.PAUSED, reason="User"))
    vmi = await rig.process(key)
    rig.informer_sync()
    assert launcher.count(Method.GET_INTERFACES) == asked
    assert cond(rig, key, VMIConditionType.PAUSED) == (ConditionStatus.TRUE, "PausedByUser")
    assert vmi.status.guest_os_info is not None and vmi.status.guest_os_info.name == "BusyBox"
    rig.push(dataclasses.replace(paused, state=DomainState.RUNNING, reason="Unpaused"))
    await rig.process(key)
    assert launcher.count(Method.GET_INTERFACES) == asked + 1


async def test_a_hanging_agent_call_gives_way_to_a_domain_state_change() -> None:
    """A reconcile waiting on the guest agent (a guest paused just after the call went out
    answers only at the agent's timeout) gives the call up when the launcher pushes an
    event that changes the domain's state, not for one that leaves it: it ends at once,
    and the next reconcile writes Paused. Nothing is left waiting on the domain cache."""
    rig = Rig()
    key = await running(rig)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    agent = dataclasses.replace(launcher.domain, agent_connected=True)
    rig.push(agent, "AgentConnected")
    launcher.hang.add(Method.GET_INTERFACES)
    asking = asyncio.create_task(rig.process(key))
    for _ in range(100):  # until the reconcile is in the agent call
        if launcher.count(Method.GET_INTERFACES):
            break
        await asyncio.sleep(0)
    assert launcher.count(Method.GET_INTERFACES) == 1
    rig.push(dataclasses.replace(agent, reason="Modified"))  # the same state: keeps asking
    await asyncio.sleep(0.01)
    assert not asking.done()
    rig.push(dataclasses.replace(agent, state=DomainState.PAUSED, reason="User"))
    async with asyncio.timeout(5):
        await asking
    rig.informer_sync()
    vmi = await rig.process(key)
    assert cond(rig, key, VMIConditionType.PAUSED) == (ConditionStatus.TRUE, "PausedByUser")
    assert vmi.status.phase is VMIPhase.RUNNING
    assert not rig.domains._waiters


async def test_pod_termination_stops_the_guest_and_succeeds() -> None:
    """The launcher reports gracefulShutdown (its pod got SIGTERM): ACPI, then Succeeded."""
    rig = Rig()
    key = await running(rig, obeys_acpi=False)
    launcher = rig.launcher(key)
    assert launcher.domain is not None
    launcher.domain = dataclasses.replace(launcher.domain, graceful_shutdown=True)
    rig.push(launcher.domain)
    await rig.process(key)
    assert launcher.count(Method.SHUTDOWN) == 1
    rig.push(dataclasses.replace(launcher.domain, state=DomainState.SHUTOFF, reason="Destroyed"))
    rig.informer_sync()
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.SUCCEEDED


async def test_vmi_that_disappears_releases_its_launcher_and_domain() -> None:
    """Once the VMI object is gone, its connection and cached domain are dropped."""
    rig = Rig()
    key = await running(rig)
    uid = rig.api.vmi(key).uid
    rig.api.delete_vmi(key, finalized=True)
    rig.informer_sync()
    await rig.reconciler.process(key)
    assert uid in rig.pool.released
    assert rig.domains.get(uid) is None
    assert rig.reconciler.uids() == {}


async def test_vmis_of_other_nodes_or_phases_are_not_touched() -> None:
    """Pending VMIs, and VMIs whose active pod is on another node, are not the handler's."""
    rig = Rig()
    pending = rig.put(vmi_dict(name="a", phase="Pending", pod_uid=None))
    elsewhere = rig.put(vmi_dict(name="b", node="node02"))
    await rig.process(pending)
    await rig.process(elsewhere)
    assert rig.pool.launchers == {}
    assert sum(rig.api.status_writes.values()) == 0
