"""VirtualMachineInstanceReplicaSet (kubevirt.io/v1, vmirs): `replicas` VMIs stamped from one
template and selected by labels, as KubeVirt's type has it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model
from shared.model.enums import ConditionStatus
from shared.model.objects import KubeObject
from shared.model.selector import LabelSelector
from shared.model.vm import VMITemplateSpec

# KubeVirt's default when spec.replicas is unset.
DEFAULT_REPLICAS = 1


class ReplicaSetConditionType(enum.StrEnum):
    """VirtualMachineInstanceReplicaSetConditionType."""

    REPLICA_FAILURE = "ReplicaFailure"
    REPLICA_PAUSED = "ReplicaPaused"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSetCondition(Model):
    """status.conditions[]; unknown types and reasons load as plain strings."""

    type: ReplicaSetConditionType | str | None = None
    status: ConditionStatus | None = None
    reason: str | None = None
    message: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSetSpec(Model):
    """spec: how many VMIs, which labels select them, what they are made from."""

    replicas: int | None = None
    selector: LabelSelector | None = None
    template: VMITemplateSpec | None = None
    paused: bool | None = None

    @property
    def wanted(self) -> int:
        """spec.replicas, KubeVirt's 1 when unset."""
        return DEFAULT_REPLICAS if self.replicas is None else self.replicas


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSetStatus(Model):
    """status: counts, the selector string (for the scale subresource) and conditions."""

    replicas: int = 0
    ready_replicas: int = 0
    label_selector: str | None = None
    conditions: tuple[ReplicaSetCondition, ...] = ()

    def condition(self, type_: str) -> ReplicaSetCondition | None:
        """The condition of this type, if present."""
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineInstanceReplicaSet(KubeObject):
    """kubevirt.io/v1 VirtualMachineInstanceReplicaSet (vmirs)."""

    KIND: ClassVar[str] = "VirtualMachineInstanceReplicaSet"
    PLURAL: ClassVar[str] = "virtualmachineinstancereplicasets"

    spec: ReplicaSetSpec = field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = field(default_factory=ReplicaSetStatus)
