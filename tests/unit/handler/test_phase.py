"""Phase decisions from the domain's state (handler.phase)."""

from __future__ import annotations

import pytest

from handler.domains import DomainRecord
from handler.phase import Failure, FailureReason, decide
from shared.model import VirtualMachineInstance, VMIPhase
from shared.wire.domain import DomainState
from tests.unit.handler.fakes import domain_status, vmi_dict

S, R = VMIPhase.SCHEDULED, VMIPhase.RUNNING


def _decide(
    phase: VMIPhase, state: DomainState | None, reason: str = "", *, stopping: bool = False
) -> tuple[VMIPhase, str | None]:
    raw = vmi_dict(phase=str(phase))
    vmi = VirtualMachineInstance.from_dict(raw)
    record = (
        None
        if state is None
        else DomainRecord(status=domain_status(raw, state, reason), source="t")
    )
    verdict = decide(vmi, record, stopping=stopping)
    return verdict.phase, verdict.failure.reason if verdict.failure else None


@pytest.mark.parametrize(
    ("phase", "state", "reason", "stopping", "expected"),
    [
        pytest.param(S, None, "", False, (S, None), id="no-domain-yet"),
        pytest.param(S, DomainState.SHUTOFF, "Unknown", False, (S, None), id="defined-not-started"),
        pytest.param(S, DomainState.RUNNING, "Booted", False, (R, None), id="booted"),
        pytest.param(S, DomainState.PAUSED, "User", False, (R, None), id="started-paused"),
        pytest.param(S, DomainState.PAUSED, "StartingUp", False, (S, None), id="cpus-not-started"),
        pytest.param(R, DomainState.PAUSED, "Migration", False, (R, None), id="migration-pause"),
        pytest.param(R, DomainState.BLOCKED, "", False, (R, None), id="blocked-is-running"),
        pytest.param(R, DomainState.SHUTDOWN, "User", True, (R, None), id="shutting-down"),
        pytest.param(
            R,
            DomainState.SHUTOFF,
            "Shutdown",
            False,
            (VMIPhase.SUCCEEDED, None),
            id="guest-poweroff",
        ),
        pytest.param(
            R,
            DomainState.SHUTOFF,
            "Destroyed",
            True,
            (VMIPhase.SUCCEEDED, None),
            id="killed-on-request",
        ),
        pytest.param(
            R,
            DomainState.SHUTOFF,
            "Destroyed",
            False,
            (VMIPhase.FAILED, "DomainDestroyed"),
            id="destroyed-unasked",
        ),
        pytest.param(
            R, DomainState.SHUTOFF, "Failed", False, (VMIPhase.FAILED, "QemuDied"), id="qemu-died"
        ),
        pytest.param(
            R,
            DomainState.SHUTOFF,
            "Unknown",
            False,
            (VMIPhase.FAILED, "QemuDied"),
            id="off-unknown-while-running",
        ),
        pytest.param(
            R,
            DomainState.SHUTOFF,
            "Crashed",
            False,
            (VMIPhase.FAILED, "GuestCrashed"),
            id="shutoff-crashed",
        ),
        pytest.param(
            R,
            DomainState.CRASHED,
            "Panicked",
            False,
            (VMIPhase.FAILED, "GuestCrashed"),
            id="crashed",
        ),
        pytest.param(R, DomainState.SHUTOFF, "Migrated", False, (R, None), id="migrated-away"),
        pytest.param(R, DomainState.NO_STATE, "", False, (R, None), id="no-state"),
    ],
)
def test_phase_follows_the_domain(
    phase: VMIPhase,
    state: DomainState | None,
    reason: str,
    stopping: bool,
    expected: tuple[VMIPhase, str | None],
) -> None:
    """KubeVirt's phase table: alive → Running, asked-for ends → Succeeded, others → Failed."""
    assert _decide(phase, state, reason, stopping=stopping) == expected


def test_final_phases_never_change() -> None:
    """A Failed VMI stays Failed whatever its domain says."""
    assert _decide(VMIPhase.FAILED, DomainState.RUNNING, "Booted") == (VMIPhase.FAILED, None)


def test_a_dead_launcher_wins_over_a_running_domain() -> None:
    """The reconciler's failure (a dead launcher) decides even if the cache says Running."""
    raw = vmi_dict(phase="Running")
    record = DomainRecord(status=domain_status(raw), source="t")
    failure = Failure(reason=FailureReason.LAUNCHER_DIED, message="gone")
    verdict = decide(VirtualMachineInstance.from_dict(raw), record, stopping=False, failure=failure)
    assert (verdict.phase, verdict.failure) == (VMIPhase.FAILED, failure)


def test_deleted_domain_is_success_only_when_asked() -> None:
    """An undefined domain ends a stopping VMI well, any other VMI badly."""
    raw = vmi_dict(phase="Running")
    record = DomainRecord(
        status=domain_status(raw, DomainState.SHUTOFF, "Undefined"), source="t", deleted=True
    )
    vmi = VirtualMachineInstance.from_dict(raw)
    assert decide(vmi, record, stopping=True).phase is VMIPhase.SUCCEEDED
    assert decide(vmi, record, stopping=False).phase is VMIPhase.FAILED


@pytest.mark.parametrize(
    ("action", "watchdog_said"),
    [pytest.param("poweroff", True, id="poweroff"), pytest.param("reset", False, id="reset")],
)
def test_a_watchdog_poweroff_says_so(action: str, watchdog_said: bool) -> None:
    """A domain destroyed after its watchdog's poweroff action fails the VMI (as KubeVirt)
    with a message naming the watchdog; other destroys keep theirs."""
    raw = vmi_dict(phase="Running")
    status = domain_status(
        raw, DomainState.SHUTOFF, "Destroyed", watchdog_fired=1, watchdog_action=action
    )
    verdict = decide(
        VirtualMachineInstance.from_dict(raw), DomainRecord(status=status, source="t"),
        stopping=False,
    )  # fmt: skip
    assert verdict.phase is VMIPhase.FAILED and verdict.failure is not None
    assert verdict.failure.reason is FailureReason.DOMAIN_DESTROYED
    assert ("watchdog" in verdict.failure.message) is watchdog_said
