"""Live migration on the wire: the target's preparation, the source's job, its progress.

The target launcher prepares (disks, domain XML, an endpoint) and answers with a
`PrepareTargetResult`; the handlers carry its `address` from the target node to the source
node (VMI status.migrationState.targetNodeAddress); the source launcher's `migrate` takes
that address and runs the migration as a background job whose progress is the
`migration` map of DomainStatus (a `MigrationInfo`), also pushed with domain events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from shared.wire.errors import InvalidArgument


class MigrationRole(StrEnum):
    SOURCE = "Source"
    TARGET = "Target"


class MigrationPhase(StrEnum):
    PREPARED = "Prepared"  # target: disks and XML ready, waiting for the domain
    SCHEDULED = "Scheduled"  # source: accepted, about to start
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    def is_final(self) -> bool:
        return self in (MigrationPhase.SUCCEEDED, MigrationPhase.FAILED)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidArgument(key, f"expected a string, got {type(value).__name__}")
    return value


def _opt_int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise InvalidArgument(key, f"expected an integer, got {type(value).__name__}")
    return value


def _req_str(data: Mapping[str, Any], key: str) -> str:
    value = _opt_str(data, key)
    if not value:
        raise InvalidArgument(key, "required")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationInfo:
    """One launcher's view of the current (or last) migration of its domain."""

    role: MigrationRole
    phase: MigrationPhase
    target_address: str | None = None
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    failure_reason: str | None = None
    abort_requested: bool = False
    aborted: bool = False
    # The launcher aborted the job itself (progressTimeout, completion timeout): KubeVirt
    # reports such a migration failed with abortStatus Succeeded and its own reason.
    timed_out: bool = False
    elapsed_ms: int | None = None
    downtime_ms: int | None = None
    data_total: int | None = None
    data_processed: int | None = None
    data_remaining: int | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": str(self.role),
            "phase": str(self.phase),
            "abortRequested": self.abort_requested,
            "aborted": self.aborted,
            "timedOut": self.timed_out,
        }
        optional = {
            "targetAddress": self.target_address,
            "startTimestamp": self.start_timestamp,
            "endTimestamp": self.end_timestamp,
            "failureReason": self.failure_reason,
            "elapsedMs": self.elapsed_ms,
            "downtimeMs": self.downtime_ms,
            "dataTotal": self.data_total,
            "dataProcessed": self.data_processed,
            "dataRemaining": self.data_remaining,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        try:
            role = MigrationRole(_req_str(data, "role"))
            phase = MigrationPhase(_req_str(data, "phase"))
        except ValueError as exc:
            raise InvalidArgument("phase", str(exc)) from None
        return cls(
            role=role,
            phase=phase,
            target_address=_opt_str(data, "targetAddress"),
            start_timestamp=_opt_str(data, "startTimestamp"),
            end_timestamp=_opt_str(data, "endTimestamp"),
            failure_reason=_opt_str(data, "failureReason"),
            abort_requested=bool(data.get("abortRequested", False)),
            aborted=bool(data.get("aborted", False)),
            timed_out=bool(data.get("timedOut", False)),
            elapsed_ms=_opt_int(data, "elapsedMs"),
            downtime_ms=_opt_int(data, "downtimeMs"),
            data_total=_opt_int(data, "dataTotal"),
            data_processed=_opt_int(data, "dataProcessed"),
            data_remaining=_opt_int(data, "dataRemaining"),
        )

    @classmethod
    def from_status(cls, migration: Mapping[str, Any]) -> Self | None:
        """The info in a DomainStatus' `migration` map (None when it is empty)."""
        return cls.from_wire(migration) if migration else None


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareTargetResult:
    """Where the source must send the domain, and the XML the destination will run."""

    address: str  # the target's migration endpoint (a short directory locally)
    libvirt_uri: str
    migration_uri: str
    disks_uri: str
    domain_xml: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "libvirtUri": self.libvirt_uri,
            "migrationUri": self.migration_uri,
            "disksUri": self.disks_uri,
            "domainXml": self.domain_xml,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            address=_req_str(data, "address"),
            libvirt_uri=_req_str(data, "libvirtUri"),
            migration_uri=_req_str(data, "migrationUri"),
            disks_uri=_req_str(data, "disksUri"),
            domain_xml=_req_str(data, "domainXml"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrateArgs:
    """migrate: the target's address; its XML is read from the endpoint unless given. The
    limits are the cluster's (KubeVirt CR spec.configuration.migrations) or the
    MigrationPolicy's that selects the VMI, as the source handler resolved them."""

    address: str
    domain_xml: str | None = None
    timeout_seconds: int = 300
    # KubeVirt's progressTimeout: abort when no progress for this long. None (absent on the
    # wire, as from a handler older than the field): no such check, the timeout alone.
    progress_timeout_seconds: int | None = None
    bandwidth_mib: int = 0  # MiB/s for the memory stream; 0: unlimited
    allow_auto_converge: bool = False  # QEMU throttles the guest's vCPUs to converge
    allow_post_copy: bool = False  # libvirt may switch to post-copy (VIR_MIGRATE_POSTCOPY)
    # Volumes whose claim changes (a volume migration): copied to the target's new claim.
    migrated_volumes: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"address": self.address, "timeoutSeconds": self.timeout_seconds}
        if self.domain_xml is not None:
            out["domainXml"] = self.domain_xml
        if self.progress_timeout_seconds is not None:
            out["progressTimeoutSeconds"] = self.progress_timeout_seconds
        if self.bandwidth_mib:
            out["bandwidthMiB"] = self.bandwidth_mib
        if self.allow_auto_converge:
            out["allowAutoConverge"] = True
        if self.allow_post_copy:
            out["allowPostCopy"] = True
        if self.migrated_volumes:
            out["migratedVolumes"] = list(self.migrated_volumes)
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        known = {"address", "domainXml", "timeoutSeconds", "progressTimeoutSeconds"}
        known |= {"bandwidthMiB", "allowAutoConverge", "allowPostCopy", "migratedVolumes"}
        unknown = set(data) - known
        if unknown:
            raise InvalidArgument(sorted(unknown)[0], "unknown argument")
        timeout = _opt_positive(data, "timeoutSeconds")
        bandwidth = _opt_int(data, "bandwidthMiB") or 0
        if bandwidth < 0:
            raise InvalidArgument("bandwidthMiB", "must not be negative")
        return cls(
            address=_req_str(data, "address"),
            domain_xml=_opt_str(data, "domainXml"),
            timeout_seconds=timeout or 300,
            progress_timeout_seconds=_opt_positive(data, "progressTimeoutSeconds"),
            bandwidth_mib=bandwidth,
            allow_auto_converge=_opt_bool(data, "allowAutoConverge"),
            allow_post_copy=_opt_bool(data, "allowPostCopy"),
            migrated_volumes=_opt_names(data, "migratedVolumes"),
        )


def _opt_positive(data: Mapping[str, Any], key: str) -> int | None:
    value = _opt_int(data, key)
    if value is not None and value <= 0:
        raise InvalidArgument(key, "must be positive")
    return value


def _opt_names(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidArgument(key, "must be a list of volume names")
    return tuple(value)


def _opt_bool(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(key, "must be a boolean")
    return value
