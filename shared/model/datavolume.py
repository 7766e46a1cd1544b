"""cdi.kubevirt.io/v1beta1 DataVolume: CDI's API (kubevirt.io/containerized-data-importer-api
v1.63.1), the parts kubevirt-py acts on. Fields it does not type (s3, gcs, imageio, vddk,
checkpoints, …) stay in `extra`; the controller refuses a source it cannot import.

Shared because the controller imports (controller/datavolume/), the VM controller waits on
a DataVolume's phase, virt-api serves uploads into one and virtctl-py creates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from shared.model._codec import Model
from shared.model.objects import KubeObject

CDI_GROUP = "cdi.kubevirt.io"
CDI_VERSION = "v1beta1"
CDI_API_VERSION = f"{CDI_GROUP}/{CDI_VERSION}"
# CDI's progress before it is known, as CDI shows it.
PROGRESS_UNKNOWN = "N/A"
PROGRESS_DONE = "100.0%"
PULL_POD = "pod"  # source.registry.pullMethod values
PULL_NODE = "node"


class DataVolumePhase(StrEnum):
    """status.phase as CDI names them (the ones kubevirt-py goes through)."""

    UNSET = ""
    PENDING = "Pending"
    PVC_BOUND = "PVCBound"
    IMPORT_SCHEDULED = "ImportScheduled"
    IMPORT_IN_PROGRESS = "ImportInProgress"
    CLONE_SCHEDULED = "CloneScheduled"
    CLONE_IN_PROGRESS = "CloneInProgress"
    UPLOAD_SCHEDULED = "UploadScheduled"
    UPLOAD_READY = "UploadReady"
    WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    def is_final(self) -> bool:
        """Succeeded or Failed: the controller does nothing more."""
        return self in (DataVolumePhase.SUCCEEDED, DataVolumePhase.FAILED)


class DataVolumeConditionType(StrEnum):
    """CDI's three condition types."""

    BOUND = "Bound"
    READY = "Ready"
    RUNNING = "Running"


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeSourceHTTP(Model):
    """source.http: a disk image (raw or qcow2) at a URL."""

    url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeSourceRegistry(Model):
    """source.registry: a containerDisk image (`docker://image`); pullMethod pod (CDI's
    default) or node; secretRef (a Secret with `accessKeyId`/`secretKey`) and
    certConfigMap (CA bundles) for the importer's own pull."""

    url: str | None = None
    pull_method: str | None = None
    secret_ref: str | None = None
    cert_config_map: str | None = None

    def pulled_by_importer(self) -> bool:
        """The importer pulls the image itself (registry client, the credentials and CAs
        above): `pullMethod: pod`, CDI's default when none is set. `node`: the node's
        container runtime pulls it."""
        return self.pull_method != PULL_NODE


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeSourcePVC(Model):
    """source.pvc: the claim to clone (its namespace defaults to the DataVolume's)."""

    namespace: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeSourceEmpty(Model):
    """source.blank and source.upload carry no fields."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeSource(Model):
    """spec.source: exactly one of these."""

    http: DataVolumeSourceHTTP | None = None
    registry: DataVolumeSourceRegistry | None = None
    pvc: DataVolumeSourcePVC | None = None
    blank: DataVolumeSourceEmpty | None = None
    upload: DataVolumeSourceEmpty | None = None

    def kinds(self) -> tuple[str, ...]:
        """Wire names of every source set (typed or not: s3, gcs, … stay in extra)."""
        typed = {
            "http": self.http,
            "registry": self.registry,
            "pvc": self.pvc,
            "blank": self.blank,
            "upload": self.upload,
        }
        return tuple(k for k, v in typed.items() if v is not None) + tuple(self.extra)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeSpec(Model):
    """spec: the source and the claim to make (`pvc`: a PVC spec as is; `storage`: the
    same fields, CDI filling the defaults: ReadWriteOnce, Filesystem)."""

    source: DataVolumeSource | None = None
    content_type: str | None = None

    @property
    def pvc(self) -> Mapping[str, Any] | None:
        """spec.pvc, a PersistentVolumeClaimSpec kept as written."""
        return _mapping(self.extra.get("pvc"))

    @property
    def storage(self) -> Mapping[str, Any] | None:
        """spec.storage, the same fields with CDI's defaults to fill."""
        return _mapping(self.extra.get("storage"))


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeCondition(Model):
    """status.conditions[]."""

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    last_heartbeat_time: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeStatus(Model):
    """status: phase, progress ("N/A", "45.20%"), the claim, restarts and conditions."""

    phase: DataVolumePhase | None = None
    progress: str | None = None
    claim_name: str | None = None
    restart_count: int | None = None
    conditions: tuple[DataVolumeCondition, ...] = ()

    @property
    def phase_or_unset(self) -> DataVolumePhase:
        return self.phase if self.phase is not None else DataVolumePhase.UNSET

    def condition(self, type_: str) -> DataVolumeCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolume(KubeObject):
    """cdi.kubevirt.io/v1beta1 DataVolume (dv)."""

    KIND: ClassVar[str] = "DataVolume"
    PLURAL: ClassVar[str] = "datavolumes"

    spec: DataVolumeSpec = field(default_factory=DataVolumeSpec)
    status: DataVolumeStatus = field(default_factory=DataVolumeStatus)

    @property
    def phase(self) -> DataVolumePhase:
        return self.status.phase_or_unset

    def failure(self) -> str | None:
        """Why it failed (its Ready condition's message), None unless Failed."""
        if self.phase != DataVolumePhase.FAILED:
            return None
        ready = self.status.condition(DataVolumeConditionType.READY)
        return (ready.message if ready is not None else None) or "the DataVolume failed"
