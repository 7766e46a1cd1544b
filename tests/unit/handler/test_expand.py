"""The handler's share of ExpandDisks (handler.expand): a Running VMI's claim capacities
sent to its launcher when they change, only while the gate is on and no migration runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from handler.expand import DiskExpansion, claim_capacities
from handler.launchers import LauncherState
from shared.model import VirtualMachineInstance
from shared.wire.launcher_api import Method


def _vmi(
    capacity: str, *, phase: str = "Running", migrating: bool = False
) -> VirtualMachineInstance:
    info = {"claimName": "c", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": capacity}}
    status: dict[str, Any] = {
        "phase": phase,
        "volumeStatus": [
            {"name": "data", "target": "vdb", "persistentVolumeClaimInfo": info},
            {"name": "ro", "target": "vdc", "persistentVolumeClaimInfo": info},
        ],
    }
    if migrating:
        status["migrationState"] = {"migrationUid": "m1", "targetNode": "n2"}
    return VirtualMachineInstance.from_dict(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm", "namespace": "ns", "uid": "u1"},
            "spec": {
                "domain": {"devices": {}},
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
                    {"name": "ro", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}},
                ],
            },
            "status": status,
        }
    )


class Launcher:
    state = LauncherState.CONNECTED
    since = 0.0

    def __init__(self) -> None:
        self.sent: list[Mapping[str, Any] | None] = []

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        assert method is Method.EXPAND_DISKS
        self.sent.append(args)
        return {"expanded": {}}


def test_capacities_are_the_writable_claims_in_bytes() -> None:
    """volumeStatus capacity parsed; the readOnly claim volume is not listed."""
    assert claim_capacities(_vmi("128Mi")) == {"data": 128 << 20}


async def test_capacities_are_sent_once_per_change_while_the_gate_is_on() -> None:
    """Gate off: nothing. On: sent; the same again: not resent; grown: sent again."""
    gate = {"on": False}
    expansion = DiskExpansion(enabled=lambda: gate["on"])
    launcher = Launcher()
    await expansion.sync(_vmi("64Mi"), launcher)
    assert launcher.sent == []
    gate["on"] = True
    await expansion.sync(_vmi("64Mi"), launcher)
    await expansion.sync(_vmi("64Mi"), launcher)
    await expansion.sync(_vmi("128Mi"), launcher)
    assert launcher.sent == [
        {"capacities": {"data": 64 << 20}},
        {"capacities": {"data": 128 << 20}},
    ]


async def test_nothing_is_sent_before_running_or_during_a_migration() -> None:
    """Scheduled, or a migration in flight: the launcher is left alone."""
    expansion = DiskExpansion(enabled=lambda: True)
    launcher = Launcher()
    await expansion.sync(_vmi("64Mi", phase="Scheduled"), launcher)
    await expansion.sync(_vmi("64Mi", migrating=True), launcher)
    assert launcher.sent == []
