"""The status half of one reconcile pass: what the launcher, the domain cache and the
pass's own steps observed become the VMI's next status, written through the diffing
status writer (a no-op write is skipped; a final or replaced VMI is `Superseded`)."""

from __future__ import annotations

import dataclasses

import structlog

from handler import guestevents, hotresources, nichotplug
from handler.domains import DomainRecord
from handler.phase import Failure, LauncherView, decide, fatal_reason, launcher_failure
from handler.reconcile_deps import Pass, ReconcileOptions, ReconcilerDeps
from handler.status import Observed, next_status, still_applies
from shared.kube.vmi_events import vmi_transition_events
from shared.model import (
    VirtualMachineInstance,
    VMIConditionType,
    VMIStatus,
    format_time,
)

log = structlog.get_logger("handler.reconcile")


def stopping(vmi: VirtualMachineInstance, record: DomainRecord | None) -> bool:
    """The VMI is being deleted or its guest was asked to shut down."""
    return vmi.metadata.is_deleting or (record is not None and record.status.graceful_shutdown)


async def write(d: ReconcilerDeps, o: ReconcileOptions, step: Pass) -> VirtualMachineInstance:
    """Compute the pass's next status and write it; the VMI as it now stands."""
    vmi = step.vmi
    record = d.domains.get(vmi.uid)
    if (watchdog := guestevents.watchdog_event(record, step.local)) is not None:
        d.recorder.event(vmi, *watchdog)
    is_stopping = stopping(vmi, record)
    failure = _failure(d, o, step, record, stopping=is_stopping)
    if failure is None and step.error is not None and step.error.fatal:
        failure = Failure(reason=fatal_reason(step.error), message=step.error.message)
    verdict = decide(vmi, record, stopping=is_stopping, failure=failure)
    observed = Observed(
        domain=record,
        verdict=verdict,
        stopping=is_stopping,
        sync_error=step.error,
        guest_info=step.guest.info if step.guest else None,
        guest_interfaces=step.guest.interfaces if step.guest else None,
        plugins=d.podnet.plugins() if d.podnet is not None else (),
    )
    now = format_time(d.wall())
    status = _with_pass_results(step, next_status(vmi, observed, now=now), now=now)
    if verdict.phase != vmi.status.phase_or_unset:
        why = verdict.failure.message if verdict.failure else None
        log.info("vmi_phase", phase=str(verdict.phase), was=str(vmi.status.phase_or_unset), why=why)
    new = dataclasses.replace(vmi, status=status)

    async def refresh() -> VirtualMachineInstance:
        return still_applies(vmi, await d.get_vmi(vmi.namespace, vmi.name))

    result = await d.status.write_status(vmi, new, refresh=refresh)
    if result is not vmi:
        step.local.written = (vmi.metadata.resource_version, result)
        paused = result.status.condition_is_true(VMIConditionType.PAUSED)
        log.info("vmi_status_written", phase=str(result.status.phase_or_unset), paused=paused)
        for type_, reason, message in vmi_transition_events(vmi.status, result.status):
            d.recorder.event(result, type_, reason, message)
    return result


def _with_pass_results(step: Pass, status: VMIStatus, *, now: str) -> VMIStatus:
    """What this pass's launcher calls reported (migration, volumes, vsock, NICs,
    resources) laid over the computed status; still-settling ones ask for a revisit."""
    vmi = step.vmi
    if step.migration_state is not None:
        status = dataclasses.replace(status, migration_state=step.migration_state)
    if step.volume_status is not None:
        status = dataclasses.replace(status, volume_status=step.volume_status)
    if step.vsock_cid is not None:
        status = dataclasses.replace(status, vsock_cid=step.vsock_cid)
    if step.nics is not None:
        status = nichotplug.with_interfaces(vmi, status, step.nics)
        if nichotplug.pending(vmi, step.nics):
            step.revisit.append(nichotplug.RETRY_SECONDS)
    if step.resources is not None:
        status = hotresources.with_resources(vmi, status, step.resources, now=now)
        if hotresources.settling(step.resources, status):
            step.revisit.append(hotresources.SETTLE_SECONDS)
    return status


def _failure(
    d: ReconcilerDeps,
    o: ReconcileOptions,
    step: Pass,
    record: DomainRecord | None,
    *,
    stopping: bool,
) -> Failure | None:
    view = LauncherView(
        state=step.launcher.state,
        waited=d.clock() - step.launcher.since,
        pod_uid=step.local.pod_uid,
    )
    return launcher_failure(
        step.vmi,
        record,
        view,
        stopping=stopping,
        missing_timeout=o.launcher_missing_timeout,
    )
