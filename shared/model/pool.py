"""VirtualMachinePool (pool.kubevirt.io/v1beta1): `replicas` VirtualMachines named
`<pool>-<index>` from one template, as KubeVirt's type has it (the subset kubevirt-py acts
on is typed; the rest stays in `extra` and admission refuses what is not honoured)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model
from shared.model.meta import ObjectMeta
from shared.model.objects import KubeObject
from shared.model.replicaset import ReplicaSetStatus
from shared.model.selector import LabelSelector
from shared.model.vm import VMSpec

POOL_GROUP = "pool.kubevirt.io"
POOL_VERSION = "v1beta1"
POOL_API_VERSION = f"{POOL_GROUP}/{POOL_VERSION}"
DEFAULT_REPLICAS = 1


class SortPolicy(enum.StrEnum):
    """VirtualMachinePoolSortPolicy: which VMs go first on scale-in or update."""

    ASCENDING = "AscendingOrder"
    DESCENDING = "DescendingOrder"
    NEWEST = "Newest"
    OLDEST = "Oldest"
    RANDOM = "Random"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSelectorRequirement(Model):
    """core/v1 NodeSelectorRequirement: key, operator (In, NotIn, Exists, DoesNotExist,
    Gt, Lt) and values."""

    key: str | None = None
    operator: str | None = None
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSelectors(Model):
    """selectionPolicy.selectors: only VMs whose template labels match labelSelector and
    whose template nodeSelector matches every requirement (controller/pool/policies.py)."""

    label_selector: LabelSelector | None = None
    node_selector_requirement_matcher: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionPolicy(Model):
    """selectionPolicy: sortPolicy, and selectors narrowing the candidates."""

    sort_policy: SortPolicy | None = None
    selectors: PoolSelectors | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Proactive(Model):
    """proactive scale-in / update: VMs are stopped (deleted or restarted) at once."""

    selection_policy: SelectionPolicy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unmanaged(Model):
    """unmanaged / opportunistic: the controller leaves the VMs alone."""


class StatePreservation(enum.StrEnum):
    """A scale-in's statePreservation: what is kept of a VM selected for scale-in."""

    DISABLED = "Disabled"  # KubeVirt's default: the VM and its claims deleted
    OFFLINE = "Offline"  # its DataVolumes (and so their claims) kept, reused on scale-out
    ONLINE = "Online"  # "claims and memory": KubeVirt 1.8 keeps the claims only, as here


@dataclass(frozen=True, slots=True, kw_only=True)
class ProactiveScaleIn(Proactive):
    """scaleInStrategy.proactive: the selection, and what is kept of a VM scaled in."""

    state_preservation: StatePreservation | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpportunisticScaleIn(Unmanaged):
    """scaleInStrategy.opportunistic: what is kept of a VM deleted by other means."""

    state_preservation: StatePreservation | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Strategy(Model):
    """scaleInStrategy / updateStrategy: one of proactive, opportunistic, unmanaged."""

    proactive: Proactive | None = None
    opportunistic: Unmanaged | None = None
    unmanaged: Unmanaged | None = None

    @property
    def sort_policy(self) -> SortPolicy:
        """The proactive selection's sort policy, KubeVirt's Random by default."""
        chosen = self.proactive.selection_policy if self.proactive else None
        return chosen.sort_policy if chosen and chosen.sort_policy else SortPolicy.RANDOM


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleInStrategy(Strategy):
    """scaleInStrategy: proactive, opportunistic or unmanaged, with statePreservation.

    The proactive and opportunistic kinds say what is kept of the VMs they remove."""

    proactive: ProactiveScaleIn | None = None
    opportunistic: OpportunisticScaleIn | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NameGeneration(Model):
    """nameGeneration: whether secret / configMap references get the VM's index too."""

    append_index_to_config_map_refs: bool | None = None
    append_index_to_secret_refs: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Autohealing(Model):
    """autohealing: replace a VM after this many consecutive start failures, or failing
    (CrashLoopBackOff, Unschedulable, …) and not Ready for minFailingToStartDuration."""

    start_up_failure_threshold: int | None = None
    min_failing_to_start_duration: str | None = None  # a Go duration; KubeVirt's 5m

    @property
    def threshold(self) -> int:
        """KubeVirt's default 3."""
        return self.start_up_failure_threshold or 3


@dataclass(frozen=True, slots=True, kw_only=True)
class VMTemplateSpec(Model):
    """virtualMachineTemplate: the metadata and spec of each VM."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: VMSpec = field(default_factory=VMSpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSpec(Model):
    """spec."""

    replicas: int | None = None
    selector: LabelSelector | None = None
    virtual_machine_template: VMTemplateSpec | None = None
    paused: bool | None = None
    name_generation: NameGeneration | None = None
    scale_in_strategy: ScaleInStrategy | None = None
    update_strategy: Strategy | None = None
    autohealing: Autohealing | None = None
    max_unavailable: int | str | None = None  # VMs or "N%" of replicas; KubeVirt's 100%

    @property
    def wanted(self) -> int:
        """spec.replicas, 1 when unset."""
        return DEFAULT_REPLICAS if self.replicas is None else self.replicas


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolStatus(ReplicaSetStatus):
    """status: replicas, readyReplicas, labelSelector and conditions (as a replica set's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachinePool(KubeObject):
    """pool.kubevirt.io/v1beta1 VirtualMachinePool (vmpool)."""

    KIND: ClassVar[str] = "VirtualMachinePool"
    PLURAL: ClassVar[str] = "virtualmachinepools"
    SINGULAR: ClassVar[str] = "virtualmachinepool"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("vmpool", "vmpools")

    spec: PoolSpec = field(default_factory=PoolSpec)
    status: PoolStatus = field(default_factory=PoolStatus)
