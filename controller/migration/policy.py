"""The MigrationPolicy a handed-over migration runs under: matched against the VMI's labels
and its namespace's (one GET per handoff), recorded in the VMI's migrationState as KubeVirt
does (migrationPolicyName, migrationConfiguration), read there by the source handler."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

import structlog

from shared.kube import NAMESPACES, KubeClient
from shared.migrationpolicy import match_policy, policy_configuration
from shared.model import MigrationState, VirtualMachineInstance
from shared.model.migrationpolicy import MigrationPolicy

log = structlog.get_logger("controller.migration")

NAMESPACE_TIMEOUT = 10.0


class PolicyStamp:
    """Adds the matching policy to a new migrationState."""

    def __init__(
        self, client: KubeClient, policies: Callable[[], Sequence[MigrationPolicy]]
    ) -> None:
        self._client = client
        self._policies = policies

    async def stamp(self, vmi: VirtualMachineInstance, state: MigrationState) -> MigrationState:
        """`state` naming the policy that selects `vmi` (unchanged when none does)."""
        policies = self._policies()
        if not policies:
            return state
        async with asyncio.timeout(NAMESPACE_TIMEOUT):
            namespace = await self._client.get(NAMESPACES, vmi.namespace)
        labels = (namespace.get("metadata") or {}).get("labels") or {}
        policy = match_policy(policies, vmi_labels=vmi.metadata.labels, namespace_labels=labels)
        if policy is None:
            return state
        log.info("migration_policy_matched", vmi=vmi.key, policy=policy.name)
        return dataclasses.replace(
            state,
            migration_policy_name=policy.name,
            migration_configuration=policy_configuration(policy),
        )
