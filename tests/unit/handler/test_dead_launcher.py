"""A dead launcher is a failed VMI: the pure judgement (handler.phase.launcher_failure) and
the reconcile loop around it — the pod remembered when activePods drops it, and a verdict
the controller wrote first never overwritten."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from handler.domains import DomainRecord
from handler.launchers import LauncherState
from handler.phase import LauncherView, launcher_failure
from shared.model import MigrationState, VirtualMachineInstance, VMIPhase
from shared.wire.domain import DomainState
from tests.unit.handler.fakes import domain_status, vmi_dict
from tests.unit.handler.rig import MISSING_TIMEOUT, Rig
from tests.unit.handler.test_reconcile import running

GONE, WAITING = LauncherState.GONE, LauncherState.WAITING


@pytest.mark.parametrize(
    ("phase", "launcher", "domain", "stopping", "dies"),
    [
        pytest.param("Running", GONE, DomainState.RUNNING, False, True, id="gone-domain-alive"),
        pytest.param("Running", GONE, None, False, True, id="gone-no-domain-known"),
        pytest.param("Scheduled", GONE, None, False, True, id="gone-before-running"),
        pytest.param("Running", GONE, DomainState.RUNNING, True, False, id="gone-while-stopping"),
        pytest.param("Running", GONE, DomainState.SHUTOFF, False, False, id="domain-ended-first"),
        pytest.param("Running", WAITING, None, False, False, id="still-starting"),
        pytest.param("Scheduled", WAITING, None, False, False, id="scheduled-starting"),
        pytest.param("Running", LauncherState.RECONNECTING, None, False, False, id="reconnecting"),
        pytest.param("Running", LauncherState.UNRESPONSIVE, None, False, False, id="slow"),
    ],
)
def test_launcher_failure_needs_a_dead_launcher_and_a_domain_not_reported_off(
    phase: str,
    launcher: LauncherState,
    domain: DomainState | None,
    stopping: bool,
    dies: bool,
) -> None:
    """Gone (socket vanished or refusing) fails the VMI unless a stop was asked or the
    domain was reported off first; starting, reconnecting or slow launchers do not."""
    raw = vmi_dict(phase=phase)
    vmi = VirtualMachineInstance.from_dict(raw)
    record = None if domain is None else DomainRecord(status=domain_status(raw, domain), source="t")
    view = LauncherView(state=launcher, waited=1.0, pod_uid="pod-1")
    failure = launcher_failure(
        vmi, record, view, stopping=stopping, missing_timeout=MISSING_TIMEOUT
    )
    assert (failure is not None) is dies
    if failure is not None:
        assert failure.reason == "LauncherDied"
        assert "virt-launcher of pod pod-1 died" in failure.message


def test_a_running_vmis_launcher_that_never_shows_up_fails_only_after_the_timeout() -> None:
    """Waiting (no socket) for a Running VMI: nothing until the timeout, then LauncherDied."""
    vmi = VirtualMachineInstance.from_dict(vmi_dict(phase="Running"))
    early = LauncherView(state=WAITING, waited=MISSING_TIMEOUT - 1, pod_uid=None)
    late = dataclasses.replace(early, waited=MISSING_TIMEOUT)
    assert (
        launcher_failure(vmi, None, early, stopping=False, missing_timeout=MISSING_TIMEOUT) is None
    )
    failure = launcher_failure(vmi, None, late, stopping=False, missing_timeout=MISSING_TIMEOUT)
    assert failure is not None and failure.reason == "LauncherDied"


async def test_launcher_death_is_seen_even_after_active_pods_dropped_its_pod() -> None:
    """activePods stops naming the pod (a controller dropped the terminal pod) while the VMI
    still runs here: the handler keeps watching the launcher it had and fails the VMI,
    naming that pod, in one write."""
    rig = Rig()
    key = await running(rig)
    raw = copy.deepcopy(rig.api.vmis[key])
    raw["status"]["activePods"] = {}
    rig.put(raw)
    writes = rig.api.status_writes[key]
    rig.launcher(key).state = GONE
    vmi = await rig.process(key)
    assert (vmi.status.phase, vmi.status.reason) == (VMIPhase.FAILED, "LauncherDied")
    ready = vmi.status.condition("Ready")
    assert ready is not None and "virt-launcher of pod pod-1 died" in (ready.message or "")
    assert rig.api.status_writes[key] == writes + 1
    rig.informer_sync()
    await rig.process(key)
    assert rig.api.status_writes[key] == writes + 1


async def test_a_failure_the_controller_wrote_first_is_never_overwritten() -> None:
    """The controller failed the VMI (its launcher pod died) before the handler's cache saw
    it: the handler's write conflicts, the fresh VMI is final, nothing is written over it;
    once the cache catches up the launcher is let go."""
    rig = Rig()
    key = await running(rig)
    raw = copy.deepcopy(rig.api.vmis[key])
    raw["status"].update(phase="Failed", reason="LauncherDied")
    by_controller = rig.api.put_vmi(raw)  # the handler's informer has not seen it yet
    writes = rig.api.status_writes[key]
    launcher = rig.launcher(key)
    launcher.state = GONE
    await rig.process(key)
    assert rig.api.status_writes[key] == writes
    assert rig.api.vmis[key]["status"] == by_controller["status"]
    assert rig.queue.rate_limited == [key]
    rig.informer_sync()
    await rig.process(key)
    assert rig.api.status_writes[key] == writes
    assert rig.api.vmis[key]["metadata"]["uid"] in rig.pool.released


async def test_a_write_never_lands_on_a_new_vmi_of_the_same_name() -> None:
    """The VM replaced the failed VMI with a new one of the same name meanwhile: the
    handler's conflicting write for the old one is dropped, the new VMI is untouched."""
    rig = Rig()
    key = await running(rig)
    rig.launcher(key).state = GONE
    replacement = rig.api.put_vmi(vmi_dict(pod_uid="pod-2"))  # the cache shows the old one
    await rig.process(key)
    assert rig.api.conflicts == 1
    assert rig.api.vmis[key]["status"] == replacement["status"]


async def test_a_launcher_gone_after_the_migration_hand_off_fails_nothing() -> None:
    """This node was the source of a completed migration: its launcher exiting is the
    hand-off, not a death; the VMI (running on the target) is not written."""
    rig = Rig()
    key = await running(rig)
    raw = copy.deepcopy(rig.api.vmis[key])
    state = MigrationState(
        source_node="node01", target_node="node02", completed=True, migration_uid="m"
    )
    raw["status"]["migrationState"] = state.to_dict()
    rig.put(raw)
    writes = rig.api.status_writes[key]
    rig.launcher(key).state = GONE
    vmi = await rig.process(key)
    assert vmi.status.phase is VMIPhase.RUNNING
    assert rig.api.status_writes[key] == writes
