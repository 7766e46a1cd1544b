"""export.kubevirt.io/v1beta1 VirtualMachineExport: KubeVirt's API (kubevirt.io/api v1.8.2
export/v1beta1), the parts kubevirt-py acts on, and the contract between the export
controller (controller/export/), the exporter pod (exportserver/) and virtctl-py.

    spec.source        a PersistentVolumeClaim, a (stopped) VirtualMachine or a
                       VirtualMachineSnapshot (its claims restored), by name
    spec.tokenSecretRef the Secret whose `token` key the downloads must present
    spec.ttlDuration   Go duration ("2h", "90m", "1h30m"); KubeVirt's default is 2h

The exporter serves `https://<service>.<ns>.svc/volumes/<claim>/disk.img` (raw) and
`.../disk.img.gz` (gzip), each asking for the token in the `x-kubevirt-export-token` header
(or query parameter).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import ClassVar

from shared.model._codec import Model
from shared.model.errors import FieldError
from shared.model.objects import KubeObject
from shared.naming import SUBDOMAIN, fit

EXPORT_GROUP = "export.kubevirt.io"
EXPORT_VERSION = "v1beta1"
EXPORT_API_VERSION = f"{EXPORT_GROUP}/{EXPORT_VERSION}"
TOKEN_HEADER = "x-kubevirt-export-token"
TOKEN_KEY = "token"
DEFAULT_TTL = timedelta(hours=2)
# The exporter's port and the Service's (KubeVirt's: 443 → 8443, named "export").
SERVER_PORT = 8443
SERVICE_PORT = 443
READY_PATH = "/exportready"
VOLUMES_PATH = "/volumes"
RAW_FILE = "disk.img"
GZIP_FILE = "disk.img.gz"
ARCHIVE_FILE = "disk.tar.gz"  # a claim's files (no disk: a memory dump's), tar.gz
APP = "virt-exporter"
SERVICE_LABEL = "kubevirt.io.virt-export-service"
PVC_KIND = "PersistentVolumeClaim"
VM_KIND = "VirtualMachine"
SNAPSHOT_KIND = "VirtualMachineSnapshot"
SOURCE_GROUPS = {
    PVC_KIND: ("", "core"),
    VM_KIND: ("kubevirt.io",),
    SNAPSHOT_KIND: ("snapshot.kubevirt.io",),
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ExportPhase(StrEnum):
    """status.phase as KubeVirt names them."""

    PENDING = "Pending"
    READY = "Ready"
    TERMINATED = "Terminated"
    SKIPPED = "Skipped"


class ExportFormat(StrEnum):
    """status.links.*.volumes[].formats[].format."""

    RAW = "raw"
    GZIP = "gzip"
    DIR = "dir"
    TAR_GZ = "tar.gz"


class ExportConditionType(StrEnum):
    READY = "Ready"
    PVC_READY = "PVCReady"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportSource(Model):
    """spec.source: a TypedLocalObjectReference."""

    api_group: str | None = None
    kind: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportSpec(Model):
    """spec: what to export, the token Secret and how long."""

    source: ExportSource | None = None
    token_secret_ref: str | None = None
    ttl_duration: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportVolumeFormat(Model):
    """One download of a volume: its format and URL."""

    format: ExportFormat | str | None = None
    url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportVolume(Model):
    """One exported volume (named after its claim) and its downloads."""

    name: str | None = None
    formats: tuple[ExportVolumeFormat, ...] = ()

    def url(self, fmt: ExportFormat) -> str | None:
        return next((f.url for f in self.formats if f.format == fmt), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportLink(Model):
    """links.internal / links.external: the CA certificate (PEM) and the volumes."""

    cert: str | None = None
    volumes: tuple[ExportVolume, ...] = ()

    def volume(self, name: str | None) -> ExportVolume | None:
        """The named volume, or the only one when `name` is None."""
        if name is None:
            return self.volumes[0] if len(self.volumes) == 1 else None
        return next((v for v in self.volumes if v.name == name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportLinks(Model):
    internal: ExportLink | None = None
    external: ExportLink | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportCondition(Model):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportStatus(Model):
    """status: phase, links, the token Secret, the expiry and the Service."""

    phase: ExportPhase | None = None
    links: ExportLinks | None = None
    token_secret_ref: str | None = None
    ttl_expiration_time: str | None = None
    service_name: str | None = None
    virtual_machine_name: str | None = None
    conditions: tuple[ExportCondition, ...] = ()

    def condition(self, type_: str) -> ExportCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineExport(KubeObject):
    """export.kubevirt.io/v1beta1 VirtualMachineExport (vmexport)."""

    KIND: ClassVar[str] = "VirtualMachineExport"
    PLURAL: ClassVar[str] = "virtualmachineexports"

    spec: ExportSpec = field(default_factory=ExportSpec)
    status: ExportStatus = field(default_factory=ExportStatus)

    @property
    def phase(self) -> ExportPhase | None:
        return self.status.phase


def parse_duration(text: str) -> timedelta:
    """A Go duration ("2h", "1h30m", "90s", "1.5h"); ValueError when it is not one."""
    rest = text.strip()
    if not rest:
        raise ValueError("empty duration")
    seconds = 0.0
    while rest:
        match = _DURATION.match(rest)
        if match is None:
            raise ValueError(f"{text!r} is not a duration (e.g. 2h, 90m, 1h30m)")
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        rest = rest[match.end() :]
    return timedelta(seconds=seconds)


def export_names(name: str) -> tuple[str, str]:
    """(exporter pod name, Service name): KubeVirt's virt-export-<name>, dots replaced."""
    base = fit(f"virt-export-{name.replace('.', '-')}")
    return base, base


def default_token_secret(name: str) -> str:
    """The token Secret made when spec.tokenSecretRef is unset (KubeVirt's name)."""
    return fit(f"export-token-{name}", limit=SUBDOMAIN)


def volume_path(volume: str, fmt: ExportFormat) -> str:
    """The server path of a volume's download."""
    files = {ExportFormat.GZIP: GZIP_FILE, ExportFormat.TAR_GZ: ARCHIVE_FILE}
    return f"{VOLUMES_PATH}/{volume}/{files.get(fmt, RAW_FILE)}"


def export_errors(vme: VirtualMachineExport) -> list[FieldError]:
    """What admission refuses: a missing or unsupported source, a bad ttlDuration."""
    errors: list[FieldError] = []
    source = vme.spec.source
    if source is None or not source.kind:
        errors.append(FieldError(path="spec.source.kind", message="required"))
    elif source.kind not in SOURCE_GROUPS:
        supported = " or ".join(SOURCE_GROUPS)
        errors.append(
            FieldError(
                path="spec.source.kind",
                message=f"{source.kind!r} is not supported (export a {supported})",
            )
        )
    elif (source.api_group or "") not in SOURCE_GROUPS[source.kind]:
        errors.append(
            FieldError(
                path="spec.source.apiGroup",
                message=f"{source.api_group!r} does not serve {source.kind}",
            )
        )
    if source is None or not source.name:
        errors.append(FieldError(path="spec.source.name", message="required"))
    ttl = vme.spec.ttl_duration
    if ttl is not None:
        try:
            if parse_duration(ttl) <= timedelta(0):
                errors.append(FieldError(path="spec.ttlDuration", message="must be positive"))
        except ValueError as e:
            errors.append(FieldError(path="spec.ttlDuration", message=str(e)))
    return errors
