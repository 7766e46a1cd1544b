"""Which phase a VMI is in, decided from what its domain and launcher say (pure).

KubeVirt's rules, ported: a running, paused or blocked domain is Running; a guest that
powered itself off (or was stopped because the VMI or its pod was deleted) Succeeded; a
crash, a QEMU that died, a domain destroyed behind our back, or a dead launcher is
Failed with a reason. Succeeded and Failed never change again.

A dead launcher (`launcher_failure`): its command socket vanished or refuses connections
while its domain was last reported alive. A container takes QEMU along with it, so the
guest is gone too (KubeVirt's handler treats the domain of a dead launcher as deleted and
fails the VMI). Not a dead launcher: one that exited after a stop was asked (the guest's
end is judged from its domain), one whose domain was reported off first (shut down,
crashed, migrated away: that verdict stands), one still starting (no socket yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from handler.domains import DomainRecord
from handler.errors import SyncError, SyncReason
from handler.launchers import LauncherState
from shared.model import ConditionReason, VirtualMachineInstance, VMIPhase
from shared.wire.domain import DomainState


class FailureReason(StrEnum):
    """status.reason of a Failed VMI (set by the handler)."""

    GUEST_CRASHED = "GuestCrashed"
    QEMU_DIED = "QemuDied"
    DOMAIN_DESTROYED = "DomainDestroyed"
    DOMAIN_VANISHED = "DomainVanished"
    LAUNCHER_DIED = str(ConditionReason.LAUNCHER_DIED)  # the controller writes it too
    INVALID_SPEC = "InvalidSpec"
    HYPERVISOR_UNSUPPORTED = "HypervisorUnsupported"  # KVM-only settings on a TCG node


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    reason: FailureReason
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The phase to write, and why when it is Failed."""

    phase: VMIPhase
    failure: Failure | None = None


ALIVE_STATES = frozenset(
    {
        DomainState.RUNNING,
        DomainState.BLOCKED,
        DomainState.PAUSED,
        DomainState.PM_SUSPENDED,
        DomainState.SHUTDOWN,  # shutting down: still running until it is off
    }
)
NOT_STARTED_REASONS = frozenset({"", "Unknown"})
# libvirt pauses a domain by itself for these; the guest is not paused by anyone.
TRANSIENT_PAUSE_REASONS = frozenset(
    {"StartingUp", "Migration", "Save", "Dump", "Snapshot", "ShuttingDown", "PostCopy"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LauncherView:
    """What the handler knows about a VMI's launcher when it judges it."""

    state: LauncherState
    waited: float  # seconds in `state`
    pod_uid: str | None  # its pod (status.activePods), named in the message


def launcher_failure(
    vmi: VirtualMachineInstance,
    domain: DomainRecord | None,
    launcher: LauncherView,
    *,
    stopping: bool,
    missing_timeout: float,
) -> Failure | None:
    """Failed(LauncherDied) when the launcher is dead and its domain not reported off."""
    if stopping or (domain is not None and domain.is_off):
        return None
    pod = "the virt-launcher"
    if launcher.pod_uid:
        pod += f" of pod {launcher.pod_uid}"
    if launcher.state is LauncherState.GONE:
        return Failure(
            reason=FailureReason.LAUNCHER_DIED,
            message=f"{pod} died: its command socket is gone or refuses connections",
        )
    if (
        launcher.state is LauncherState.WAITING
        and vmi.status.phase is VMIPhase.RUNNING
        and launcher.waited >= missing_timeout
    ):
        return Failure(
            reason=FailureReason.LAUNCHER_DIED,
            message=f"{pod} has served no command socket for {launcher.waited:.0f}s",
        )
    return None


def fatal_reason(error: SyncError) -> FailureReason:
    """status.reason of a VMI failed by a fatal sync error."""
    if error.reason is SyncReason.HYPERVISOR_UNSUPPORTED:
        return FailureReason.HYPERVISOR_UNSUPPORTED
    return FailureReason.INVALID_SPEC


def user_paused(domain: DomainRecord) -> bool:
    """Paused by a request (pause, startStrategy: Paused) or an I/O error, not in passing."""
    st = domain.status
    return st.state is DomainState.PAUSED and st.reason not in TRANSIENT_PAUSE_REASONS


def decide(
    vmi: VirtualMachineInstance,
    domain: DomainRecord | None,
    *,
    stopping: bool,
    failure: Failure | None = None,
) -> Verdict:
    """The phase `vmi` is in given its domain; `failure` (a dead launcher …) wins."""
    current = vmi.status.phase_or_unset
    if current.is_final():
        return Verdict(phase=current)
    if failure is not None:
        return Verdict(phase=VMIPhase.FAILED, failure=failure)
    if domain is None:
        return Verdict(phase=current)
    return _from_domain(current, domain, stopping=stopping)


def _from_domain(current: VMIPhase, domain: DomainRecord, *, stopping: bool) -> Verdict:
    if domain.deleted:
        return _ended(stopping, FailureReason.DOMAIN_VANISHED, "the domain was undefined")
    state = domain.status.state
    starting = state is DomainState.PAUSED and domain.status.reason == "StartingUp"
    if starting and current is not VMIPhase.RUNNING:
        return Verdict(phase=current)  # QEMU is up, the guest's CPUs not yet started
    if state in ALIVE_STATES:
        return Verdict(phase=VMIPhase.RUNNING)
    if state is DomainState.CRASHED:
        return _failed(FailureReason.GUEST_CRASHED, f"the guest crashed ({domain.status.reason})")
    if state is DomainState.SHUTOFF:
        return _watchdog_said(_shutoff(current, domain.status.reason, stopping=stopping), domain)
    return Verdict(phase=current)  # NoState: nothing to conclude yet


def _shutoff(current: VMIPhase, reason: str, *, stopping: bool) -> Verdict:
    if reason == "Shutdown":
        return Verdict(phase=VMIPhase.SUCCEEDED)
    if reason == "Destroyed":
        return _ended(stopping, FailureReason.DOMAIN_DESTROYED, "the domain was destroyed")
    if reason == "Migrated":
        return Verdict(phase=current)
    if reason in NOT_STARTED_REASONS and current is not VMIPhase.RUNNING:
        return Verdict(phase=current)  # defined, not started yet
    if reason == "Crashed":
        return _failed(FailureReason.GUEST_CRASHED, "the guest crashed")
    return _failed(FailureReason.QEMU_DIED, f"QEMU stopped unexpectedly (libvirt reason {reason})")


def _watchdog_said(verdict: Verdict, domain: DomainRecord) -> Verdict:
    """A domain destroyed by its watchdog's poweroff action says so in the failure."""
    st = domain.status
    failure = verdict.failure
    if failure is None or failure.reason is not FailureReason.DOMAIN_DESTROYED:
        return verdict
    if st.watchdog_fired == 0 or st.watchdog_action != "poweroff":
        return verdict
    message = "the guest's watchdog expired: its poweroff action destroyed the domain"
    return Verdict(phase=verdict.phase, failure=Failure(reason=failure.reason, message=message))


def _ended(stopping: bool, reason: FailureReason, message: str) -> Verdict:
    """A domain we asked to stop Succeeded; the same end unasked is a failure."""
    if stopping:
        return Verdict(phase=VMIPhase.SUCCEEDED)
    return _failed(reason, f"{message} without a stop request")


def _failed(reason: FailureReason, message: str) -> Verdict:
    return Verdict(phase=VMIPhase.FAILED, failure=Failure(reason=reason, message=message))
