"""The target handler's record of a failed prepare: never over a cancelled migration."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from handler.migration_target import MigrationTargets
from shared.kube import Informer, StatusWriter, WorkQueue
from shared.model import MigrationState, VirtualMachineInstance, VirtualMachineInstanceMigration

STATE = MigrationState(migration_uid="m1", source_node="a", target_node="b")
VMI = VirtualMachineInstance.from_dict(
    {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
     "metadata": {"name": "v", "namespace": "ns", "uid": "u1"}, "spec": {}},
)  # fmt: skip


def with_state(state: MigrationState) -> VirtualMachineInstance:
    return dataclasses.replace(VMI, status=dataclasses.replace(VMI.status, migration_state=state))


class Writes:
    def __init__(self) -> None:
        self.written: list[VirtualMachineInstance] = []

    async def write_status(self, old: Any, new: VirtualMachineInstance, *, refresh: Any) -> None:
        self.written.append(new)


def targets(fresh: VirtualMachineInstance, writes: Writes) -> MigrationTargets:
    async def get_vmi(namespace: str, name: str) -> VirtualMachineInstance:
        return fresh

    return MigrationTargets(
        node="b",
        pods_dir=Path("/nonexistent"),
        informer=cast(Informer[VirtualMachineInstanceMigration], None),
        queue=cast(WorkQueue, None),
        get_vmi=get_vmi,
        writer=cast(StatusWriter[VirtualMachineInstance], writes),
        wall=lambda: datetime(2026, 11, 22, tzinfo=UTC),
    )


async def test_a_failed_prepare_is_recorded_when_nothing_else_happened() -> None:
    """The VMI still shows the migration unsettled: it is failed with the reason."""
    writes = Writes()
    t = targets(with_state(STATE), writes)
    await t._record_prepare_failure(with_state(STATE), STATE, "preparing the target failed: x")
    (new,) = writes.written
    state = new.status.migration_state
    assert (
        state is not None
        and state.failed
        and state.failure_reason == "preparing the target failed: x"
    )


async def test_a_cancelled_or_settled_migration_is_not_overwritten() -> None:
    """Cancelled meanwhile (abortRequested) or already failed by the source side's abort:
    the prepare failure (the target pod went away under it) writes nothing."""
    aborted = dataclasses.replace(STATE, failed=True, failure_reason="Migration aborted: x")
    for fresh in (dataclasses.replace(STATE, abort_requested=True), aborted):
        writes = Writes()
        t = targets(with_state(fresh), writes)
        await t._record_prepare_failure(with_state(STATE), STATE, "preparing the target failed")
        assert writes.written == []


class _Store:
    def __init__(self, m: VirtualMachineInstanceMigration) -> None:
        self.m = m
        self.store = self

    def get(self, key: str) -> VirtualMachineInstanceMigration:
        return self.m


def _vmim(half: dict[str, Any]) -> VirtualMachineInstanceMigration:
    return VirtualMachineInstanceMigration.from_dict(
        {"metadata": {"name": "m", "namespace": "ns", "uid": "m1"},
         "spec": {"vmiName": "v", **half},
         "status": {"migrationState": {"migrationUid": "m1", "targetNode": "b"}}}
    )  # fmt: skip


async def test_only_the_receiving_half_of_a_decentralized_migration_is_the_targets() -> None:
    """The sending VMIM (sendTo) mirrors a state naming this node as target, but its VMI
    is the source's: it is not prepared here. The receiving VMIM is, with its VMI."""
    t = targets(with_state(STATE), Writes())
    sending = _vmim({"sendTo": {"migrationID": "x", "connectURL": "h:1"}})
    t._informer = cast(Informer[VirtualMachineInstanceMigration], _Store(sending))
    assert await t._ours("ns/m") is None
    t._informer = cast(
        Informer[VirtualMachineInstanceMigration], _Store(_vmim({"receive": {"migrationID": "x"}}))
    )
    assert await t._ours("ns/m") == (with_state(STATE), STATE)
