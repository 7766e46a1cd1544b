"""What the KubeVirt CR's status says (pure): virt-operator's phase and conditions, so
`kubectl -n kubevirt wait kv kubevirt --for condition=Available` works as KubeVirt's user
guide writes it.

Available: the daemons run (this controller is leading) with the configuration in force.
Degraded: the CR's latest configuration did not validate; the last good one stays in force
and the condition names the fields. Also when its migration network's NAD is not there
(mignet.py), naming `spec.configuration.migrations.network`. Progressing: never (nothing
is rolled out here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from shared.clusterconfig import InvalidKubeVirt
from shared.model import ConditionStatus, VMCondition
from shared.model.kubevirt import KubeVirt, KubeVirtStatus

PHASE_DEPLOYED = "Deployed"
AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"


def _condition(
    type_: str, true: bool, reason: str, message: str, *, old: Sequence[VMCondition], now: str
) -> VMCondition:
    status = ConditionStatus.TRUE if true else ConditionStatus.FALSE
    previous = next((c for c in old if c.type == type_), None)
    same = previous is not None and previous.status == status
    since = previous.last_transition_time if same and previous is not None else now
    return VMCondition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_probe_time=since,
        last_transition_time=since,
    )


def plan_status(
    kv: KubeVirt,
    *,
    error: InvalidKubeVirt | None,
    version: str,
    now: str,
    network_problem: str | None = None,
) -> KubeVirtStatus:
    """The status `kv` should carry; `error`: its configuration was refused;
    `network_problem`: its migration network cannot be given to the handlers."""
    old = kv.status.conditions
    if error is not None:
        message = "configuration not applied, the last good one stays in force: " + "; ".join(
            str(e) for e in error.errors
        )
        degraded = _condition(DEGRADED, True, "InvalidConfiguration", message, old=old, now=now)
    elif network_problem is not None:
        reason = "MigrationNetworkNotFound"
        degraded = _condition(DEGRADED, True, reason, network_problem, old=old, now=now)
    else:
        degraded = _condition(DEGRADED, False, "AllComponentsReady", "", old=old, now=now)
    conditions = (
        _condition(
            AVAILABLE, True, "AllComponentsReady", "All components are ready.", old=old, now=now
        ),
        _condition(PROGRESSING, False, "AllComponentsReady", "", old=old, now=now),
        degraded,
    )
    kept = tuple(c for c in old if c.type not in (AVAILABLE, PROGRESSING, DEGRADED))
    return dataclasses.replace(
        kv.status,
        phase=PHASE_DEPLOYED,
        conditions=(*conditions, *kept),
        observed_kube_virt_version=version,
        target_kube_virt_version=version,
        observed_generation=kv.metadata.generation,
    )
