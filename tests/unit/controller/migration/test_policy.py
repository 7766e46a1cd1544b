"""A handed-over migration's migrationState names the MigrationPolicy that selects its VMI
(by the VMI's labels and its namespace's, read once) and carries its values."""

from __future__ import annotations

from typing import Any, cast

from controller.migration.policy import PolicyStamp
from shared.kube import KubeClient, Resource
from shared.model import MigrationState, VirtualMachineInstance
from shared.model.migrationpolicy import MigrationPolicy


class Namespaces:
    """get() of a namespace with labels (the one call PolicyStamp makes)."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.gets: list[str] = []

    async def get(self, resource: Resource, name: str, **_: Any) -> dict[str, Any]:
        self.gets.append(f"{resource.plural}/{name}")
        return {"metadata": {"name": name, "labels": self.labels}}


def vmi() -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a", "namespace": "ns", "labels": {"tier": "db"}}}
    )


async def test_the_matching_policy_is_recorded() -> None:
    """migrationPolicyName and migrationConfiguration are those of the policy selecting it."""
    policy = MigrationPolicy.from_dict(
        {
            "metadata": {"name": "slow"},
            "spec": {
                "selectors": {"namespaceSelector": {"team": "a"}},
                "bandwidthPerMigration": "8Mi",
            },
        }
    )
    client = Namespaces({"team": "a"})
    stamp = PolicyStamp(cast(KubeClient, client), lambda: [policy])
    state = await stamp.stamp(vmi(), MigrationState(migration_uid="u"))
    assert state.migration_policy_name == "slow"
    assert state.migration_configuration is not None
    assert state.migration_configuration.bandwidth_per_migration == "8Mi"
    assert client.gets == ["namespaces/ns"]


async def test_without_policies_nothing_is_read() -> None:
    """No policy: the state is unchanged and the namespace is not read."""
    client = Namespaces({})
    state = MigrationState(migration_uid="u")
    assert await PolicyStamp(cast(KubeClient, client), list).stamp(vmi(), state) == state
    assert client.gets == []
