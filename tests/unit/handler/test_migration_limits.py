"""The source handler puts the migration limits in force (the KubeVirt CR's, read live)
into the launcher's migrate call: bandwidth, completion and progress timeouts,
auto-converge, post-copy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from handler.daemon import Handler
from handler.launchers import LauncherState
from handler.migration_source import SourceStep, completion_timeout, with_limits
from shared.clusterconfig import MigrationLimits
from shared.kube import Registry
from shared.model import KubeVirt, MigrationState, VirtualMachineInstance
from shared.wire.errors import InvalidArgument
from shared.wire.launcher_api import Method
from shared.wire.migration import MigrateArgs
from tests.unit.handler.fakes import NODE, FakeApi
from tests.unit.handler.test_daemon import _config


def vmi(memory: str) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a"}, "spec": {"domain": {"memory": {"guest": memory}}}}
    )


def test_the_limits_reach_the_migrate_arguments() -> None:
    """Bandwidth, the switches and the per-GiB timeout are carried on the wire."""
    todo = SourceStep(call=Method.MIGRATE, args=MigrateArgs(address="unix:///a").to_wire())
    limits = MigrationLimits(
        bandwidth_mib=16, completion_timeout_per_gib=10, allow_auto_converge=True
    )
    args = MigrateArgs.from_wire(with_limits(todo, vmi("4Gi"), limits).args or {})
    assert (args.address, args.bandwidth_mib, args.timeout_seconds) == ("unix:///a", 16, 40)
    assert args.progress_timeout_seconds == 150
    assert args.allow_auto_converge and not args.allow_post_copy


def test_a_small_guest_gets_one_gib_worth_of_time() -> None:
    """A 64Mi guest is counted as 1 GiB: completionTimeoutPerGiB seconds."""
    assert completion_timeout(vmi("64Mi"), MigrationLimits(completion_timeout_per_gib=150)) == 150


def test_the_switches_round_trip_and_bad_ones_are_named() -> None:
    """allowAutoConverge / allowPostCopy decode back; a non-boolean is refused by name."""
    args = MigrateArgs(address="x", allow_post_copy=True, allow_auto_converge=True)
    assert MigrateArgs.from_wire(args.to_wire()) == args
    try:
        MigrateArgs.from_wire({"address": "x", "allowPostCopy": "yes"})
    except Exception as e:
        assert "allowPostCopy" in str(e)
    else:
        raise AssertionError("a string was accepted as allowPostCopy")


def test_a_volume_migration_names_its_volumes_in_the_migrate_arguments() -> None:
    """While VolumesChange=True the VMI's migratedVolumes whose spec names the destination
    reach the launcher's migrate call (it copies those disks to the new claims); bad
    values are named on the wire."""
    raw = vmi("1Gi").to_dict()
    raw["spec"]["volumes"] = [
        {"name": n, "persistentVolumeClaim": {"claimName": f"new-{n}"}} for n in ("data", "b", "c")
    ]
    moved = [
        {"volumeName": n, "destinationPVCInfo": {"claimName": f"new-{n}"}} for n in ("data", "b")
    ]
    # c's spec does not name its destination yet: not copied (nor would the target's be)
    moved.append({"volumeName": "c", "destinationPVCInfo": {"claimName": "other"}})
    raw["status"] = {
        "conditions": [{"type": "VolumesChange", "status": "True"}],
        "migratedVolumes": moved,
    }
    todo = SourceStep(call=Method.MIGRATE, args=MigrateArgs(address="unix:///a").to_wire())
    wire = with_limits(todo, VirtualMachineInstance.from_dict(raw), MigrationLimits()).args
    assert (wire or {})["migratedVolumes"] == ["b", "data"]
    assert MigrateArgs.from_wire(wire or {}).migrated_volumes == ("b", "data")
    with pytest.raises(InvalidArgument, match="migratedVolumes"):
        MigrateArgs.from_wire({"address": "a", "migratedVolumes": "data"})


def test_a_decentralized_migration_names_the_claims_in_the_migrate_arguments() -> None:
    """A source VMI handed off to another VMI (its migrationState's targetState names the
    receiving VMI): its claim volumes reach the launcher's migrate call, to be copied
    into the receiving VMI's claims."""
    raw = vmi("1Gi").to_dict()
    raw["metadata"]["namespace"] = "ns-a"
    raw["spec"]["volumes"] = [
        {"name": "root", "containerDisk": {"image": "x"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
    ]
    raw["status"] = {"migrationState": {"migrationUid": "u", "targetState": {
        "domainName": "a", "domainNamespace": "ns-b"}}}  # fmt: skip
    todo = SourceStep(call=Method.MIGRATE, args=MigrateArgs(address="unix:///a").to_wire())
    wire = with_limits(todo, VirtualMachineInstance.from_dict(raw), MigrationLimits()).args
    assert MigrateArgs.from_wire(wire or {}).migrated_volumes == ("data",)


class RecordingLauncher:
    """A launcher that records the arguments of each call."""

    state = LauncherState.CONNECTED
    since = 0.0

    def __init__(self) -> None:
        self.calls: list[tuple[Method, Mapping[str, Any]]] = []

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        self.calls.append((method, dict(args or {})))
        return {}


@pytest.mark.parametrize(
    ("migrations", "expected"),
    [
        pytest.param({"progressTimeout": 7}, 7, id="the-crs"),
        pytest.param({"bandwidthPerMigration": "1Mi"}, 150, id="kubevirts-default"),
    ],
)
async def test_the_handler_passes_the_kubevirt_crs_progress_timeout(
    tmp_path: Path, migrations: dict[str, Any], expected: int
) -> None:
    """The source handler's migrate call carries the KubeVirt CR's
    migrations.progressTimeout as read live (KubeVirt's 150 s when the CR leaves it
    unset), for the launcher to abort a migration stalled that long."""
    handler = Handler(_config(tmp_path), api=FakeApi(), registry=Registry())
    kv = {"metadata": {"name": "kubevirt", "namespace": "kubevirt"},
          "spec": {"configuration": {"migrations": migrations}}}  # fmt: skip
    handler.live.apply(KubeVirt.from_dict(kv))
    state = MigrationState(
        migration_uid="m1", source_node=NODE, target_node="b", target_node_address="/mig/x"
    )
    raw = vmi("1Gi").to_dict()
    raw["status"] = {"nodeName": NODE, "migrationState": state.to_dict()}
    launcher = RecordingLauncher()
    await handler.outgoing.step(
        VirtualMachineInstance.from_dict(raw), state, launcher, None,
        now="2026-11-30T00:00:00Z", pods_dir=tmp_path, node=NODE,
    )  # fmt: skip
    ((method, args),) = launcher.calls
    assert method is Method.MIGRATE
    assert MigrateArgs.from_wire(args).progress_timeout_seconds == expected
