"""What a DataVolume asks for (source kind, claim spec, size), or the field that is wrong:
read by the DataVolume controller and by admission alike (pure, no I/O).

    target(dv) → Target, or SpecError "spec.<field>: why"
    datavolume_errors(dv) → [FieldError] (admission's answer)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.model._validate_common import DNS1123_SUBDOMAIN
from shared.model.datavolume import PULL_NODE, PULL_POD, DataVolume, DataVolumeSourceRegistry
from shared.model.errors import FieldError, QuantityError
from shared.model.quantity import parse_bytes

SUPPORTED_SOURCES = ("http", "registry", "pvc", "blank", "upload")
DEFAULT_ACCESS_MODES = ("ReadWriteOnce",)
FILESYSTEM = "Filesystem"
BLOCK = "Block"


class SourceKind(StrEnum):
    """What fills the claim (the worker pod's mode)."""

    HTTP = "http"
    REGISTRY = "registry"
    CLONE = "pvc"
    BLANK = "blank"
    UPLOAD = "upload"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What the DataVolume asks for: its source and the claim to make."""

    kind: SourceKind
    claim_spec: Mapping[str, Any]
    size_bytes: int
    volume_mode: str


class SpecError(ValueError):
    """The DataVolume cannot be acted on; the message names the field."""


def target(dv: DataVolume) -> Target:
    """The source kind and claim spec, or SpecError naming the bad field."""
    source = dv.spec.source
    kinds = source.kinds() if source is not None else ()
    if len(kinds) != 1:
        raise SpecError(f"spec.source: exactly one source is required, got {list(kinds)}")
    if kinds[0] not in SUPPORTED_SOURCES:
        raise SpecError(
            f"spec.source.{kinds[0]}: not supported (kubevirt-py imports "
            f"{', '.join(SUPPORTED_SOURCES)})"
        )
    kind = SourceKind(kinds[0])
    _check_source(dv, kind)
    spec = claim_spec(dv)
    size = _size(spec)
    return Target(
        kind=kind,
        claim_spec=spec,
        size_bytes=size,
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
    )


def _check_source(dv: DataVolume, kind: SourceKind) -> None:
    source = dv.spec.source
    assert source is not None
    if kind is SourceKind.HTTP:
        url = source.http.url if source.http else None
        if not url or not url.startswith(("http://", "https://")):
            raise SpecError(f"spec.source.http.url: an http(s):// URL is required: {url!r}")
    elif kind is SourceKind.REGISTRY and source.registry is not None:
        check_registry(source.registry)
    elif kind is SourceKind.CLONE:
        if not (source.pvc and source.pvc.name):
            raise SpecError("spec.source.pvc.name: the claim to clone is required")
        if (source.pvc.namespace or dv.namespace) != dv.namespace:
            raise SpecError("spec.source.pvc.namespace: only clones within the namespace")


def check_registry(reg: DataVolumeSourceRegistry) -> None:
    """The image URL, the pull method, and the importer's credentials and CAs."""
    where = "spec.source.registry"
    url = reg.url
    if not url or not url.startswith("docker://") or len(url) <= len("docker://"):
        raise SpecError(f"{where}.url: docker://<image> is required: {url!r}")
    if reg.extra:
        raise SpecError(f"{where}.{sorted(reg.extra)[0]}: not supported")
    if reg.pull_method not in (None, PULL_POD, PULL_NODE):
        raise SpecError(f"{where}.pullMethod: must be pod or node: {reg.pull_method!r}")
    for field, name in (("secretRef", reg.secret_ref), ("certConfigMap", reg.cert_config_map)):
        if name is None:
            continue
        if reg.pull_method == PULL_NODE:
            raise SpecError(
                f"{where}.{field}: not used by pullMethod node (the node's runtime pulls); "
                "use pullMethod pod"
            )
        if len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
            raise SpecError(f"{where}.{field}: must be a DNS-1123 subdomain: {name!r}")


def claim_spec(dv: DataVolume) -> dict[str, Any]:
    """The PVC spec: `pvc` as written, or `storage` with CDI's defaults filled."""
    if dv.spec.pvc is not None and dv.spec.storage is not None:
        raise SpecError("spec: set pvc or storage, not both")
    if dv.spec.pvc is not None:
        return dict(dv.spec.pvc)
    if dv.spec.storage is None:
        raise SpecError("spec.storage: required (or spec.pvc)")
    spec = dict(dv.spec.storage)
    spec.setdefault("accessModes", list(DEFAULT_ACCESS_MODES))
    spec.setdefault("volumeMode", FILESYSTEM)
    return spec


def _size(spec: Mapping[str, Any]) -> int:
    where = "spec.storage.resources.requests.storage"
    raw = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if raw is None:
        raise SpecError(f"{where}: required")
    try:
        size = parse_bytes(raw)
    except QuantityError as e:
        raise SpecError(f"{where}: {e}") from None
    if size <= 0:
        raise SpecError(f"{where}: must be positive")
    return size


def datavolume_errors(dv: DataVolume) -> list[FieldError]:
    """The DataVolume's spec problem as admission reports it (none: an empty list)."""
    try:
        target(dv)
    except SpecError as e:
        path, _, message = str(e).partition(": ")
        return [FieldError(path=path, message=message)]
    return []
