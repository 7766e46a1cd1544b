"""VirtualMachine: the stateful wrapper whose controller creates and removes VMIs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.enums import PrintableStatus, RunStrategy, StateChangeAction
from shared.model.instancetype import InstancetypeMatcher
from shared.model.memorydump import MemoryDumpRequest
from shared.model.meta import ConditionsMixin, ObjectMeta, VMCondition
from shared.model.objects import KubeObject
from shared.model.vmi import VMISpec
from shared.model.volmig import UpdateVolumesStrategy, VolumeUpdateState


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeTemplateSpec(Model):
    """spec.dataVolumeTemplates[]: a DataVolume's metadata and CDI spec, kept as written
    (the VM controller creates the DataVolume; CDI's schema is the DataVolume's own)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VMITemplateSpec(Model):
    """spec.template: metadata and spec of the VMI the VM creates."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: VMISpec = field(default_factory=VMISpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class VMSpec(Model):
    """VM spec."""

    run_strategy: RunStrategy | None = None
    running: bool | None = None
    instancetype: InstancetypeMatcher | None = None
    preference: InstancetypeMatcher | None = None
    template: VMITemplateSpec = field(default_factory=VMITemplateSpec)
    data_volume_templates: tuple[DataVolumeTemplateSpec, ...] = ()
    update_volumes_strategy: UpdateVolumesStrategy | None = None

    def effective_run_strategy(self) -> RunStrategy:
        """runStrategy, else the deprecated running flag (true → Always), else Halted."""
        if self.run_strategy is not None:
            return self.run_strategy
        return RunStrategy.ALWAYS if self.running else RunStrategy.HALTED


@dataclass(frozen=True, slots=True, kw_only=True)
class StateChangeRequest(Model):
    """status.stateChangeRequests[]: how start/stop/restart are asked for."""

    action: StateChangeAction | None = None
    data: Mapping[str, str] = field(default_factory=dict)
    uid: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StartFailure(Model):
    """status.startFailure: crash-loop back-off bookkeeping."""

    consecutive_fail_count: int | None = None
    last_failed_vmi_uid: str | None = field(default=None, metadata=json_name("lastFailedVMIUID"))
    retry_after_timestamp: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VMStatus(ConditionsMixin[VMCondition], Model):
    """VM status."""

    printable_status: PrintableStatus | None = None
    ready: bool | None = None
    created: bool | None = None
    conditions: tuple[VMCondition, ...] = ()
    state_change_requests: tuple[StateChangeRequest, ...] = ()
    start_failure: StartFailure | None = None
    observed_generation: int | None = None
    desired_generation: int | None = None
    run_strategy: RunStrategy | None = None
    volume_update_state: VolumeUpdateState | None = None
    memory_dump_request: MemoryDumpRequest | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachine(KubeObject):
    """kubevirt.io/v1 VirtualMachine (vm)."""

    KIND: ClassVar[str] = "VirtualMachine"
    PLURAL: ClassVar[str] = "virtualmachines"

    spec: VMSpec = field(default_factory=VMSpec)
    status: VMStatus = field(default_factory=VMStatus)
