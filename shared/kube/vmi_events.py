"""The Events a VMI status transition deserves, with KubeVirt's reasons and messages.

Both daemons write VMI status (the controller fails VMIs whose launcher pod died, the
handler moves them to Running, Paused, Succeeded, Failed and through migrations); each
records the events of the transitions its own writes made, so none is recorded twice:

    for type_, reason, message in vmi_transition_events(old.status, written.status):
        recorder.event(written, type_, reason, message)
"""

from __future__ import annotations

from shared.kube.events import EventType
from shared.model import MigrationState, VMIConditionType, VMIPhase, VMIStatus

EventSpec = tuple[EventType, str, str]

# KubeVirt's virt-handler messages (pkg/virt-handler/vm.go).
VMI_DEFINED = "VirtualMachineInstance defined."
VMI_STARTED = "VirtualMachineInstance started."
VMI_SHUTDOWN = "The VirtualMachineInstance was shut down."
VMI_CRASHED = "The VirtualMachineInstance crashed."
VMI_PAUSED = "VirtualMachineInstance paused."
VMI_UNPAUSED = "VirtualMachineInstance unpaused."
VMI_MIGRATING = "VirtualMachineInstance is migrating."


def vmi_transition_events(old: VMIStatus, new: VMIStatus) -> list[EventSpec]:
    """Events for old → new: phase changes, Paused on/off, migration start/end, access
    credentials synced or not."""
    return [
        *_phase_events(old, new),
        *_pause_events(old, new),
        *_migration_events(old, new),
        *_credential_events(old, new),
    ]


def _phase_events(old: VMIStatus, new: VMIStatus) -> list[EventSpec]:
    was, now = old.phase_or_unset, new.phase_or_unset
    if was == now:
        return []
    if now is VMIPhase.RUNNING and was is VMIPhase.SCHEDULED:
        return [
            (EventType.NORMAL, "Created", VMI_DEFINED),
            (EventType.NORMAL, "Started", VMI_STARTED),
        ]
    if now is VMIPhase.SUCCEEDED:
        return [(EventType.NORMAL, "Stopped", VMI_SHUTDOWN)]
    if now is VMIPhase.FAILED:
        events = [(EventType.WARNING, "Stopped", VMI_CRASHED)]
        if new.reason:
            events.append((EventType.WARNING, new.reason, _failure_message(new)))
        return events
    return []


def _failure_message(status: VMIStatus) -> str:
    """What the failure's conditions say (Synchronized or Ready=False), else the reason."""
    for kind in (VMIConditionType.SYNCHRONIZED, VMIConditionType.READY):
        cond = status.condition(kind)
        if cond is not None and cond.message:
            return cond.message
    return f"VirtualMachineInstance failed: {status.reason}"


def _pause_events(old: VMIStatus, new: VMIStatus) -> list[EventSpec]:
    was = _paused(old)
    now = _paused(new)
    if now and not was:
        return [(EventType.NORMAL, "Paused", VMI_PAUSED)]
    if was and not now and not new.is_final():
        return [(EventType.NORMAL, "Resumed", VMI_UNPAUSED)]
    return []


def _paused(status: VMIStatus) -> bool:
    cond = status.condition(VMIConditionType.PAUSED)
    return cond is not None and str(cond.status) == "True"


def _migration_events(old: VMIStatus, new: VMIStatus) -> list[EventSpec]:
    before, after = old.migration_state, new.migration_state
    if after is None or not after.migration_uid:
        return []
    same = before is not None and before.migration_uid == after.migration_uid
    events: list[EventSpec] = []
    if after.start_timestamp and not (same and before and before.start_timestamp):
        events.append((EventType.NORMAL, "Migrating", VMI_MIGRATING))
    if _ended(after) and not (same and before and _ended(before)):
        events.append(_migration_end(after))
    return events


def _ended(state: MigrationState) -> bool:
    return bool(state.completed or state.failed)


def _migration_end(state: MigrationState) -> EventSpec:
    if state.failed:
        why = state.failure_reason or "unknown"
        return (
            EventType.WARNING,
            "MigrationFailed",
            f"VirtualMachineInstance migration uid {state.migration_uid} failed. reason: {why}",
        )
    return (
        EventType.NORMAL,
        "Migrated",
        f"The VirtualMachineInstance migrated to node {state.target_node or '?'}.",
    )


def _credential_events(old: VMIStatus, new: VMIStatus) -> list[EventSpec]:
    """AccessCredentialsSynchronized set or changed (KubeVirt's events and wording)."""
    kind = VMIConditionType.ACCESS_CREDENTIALS_SYNCHRONIZED
    before, after = old.condition(kind), new.condition(kind)
    if after is None or (
        before is not None and (before.status, before.message) == (after.status, after.message)
    ):
        return []
    if str(after.status) == "True":
        text = "Access credentials sync successful."
        if after.message:
            text = f"Access credentials sync successful: {after.message}"
        return [(EventType.NORMAL, "AccessCredentialsSyncSuccess", text)]
    return [
        (
            EventType.WARNING,
            "AccessCredentialsSyncFailed",
            f"Access credentials sync failed: {after.message or ''}",
        )
    ]
