"""Validation of config volumes (configMap, secret, serviceAccount, downwardAPI) and of the
Secret references of cloud-init volumes."""

from __future__ import annotations

import posixpath

from shared.model._validate_common import DNS1123_SUBDOMAIN, Errors
from shared.model.volumes import (
    DownwardAPISource,
    LocalObjectReference,
    Volume,
)

MAX_OBJECT_NAME = 253
# An ISO 9660 volume identifier holds at most 32 characters (genisoimage cuts it).
MAX_VOLUME_LABEL = 32
# downwardAPI fieldRef paths a pod volume accepts (Kubernetes' rule for volumes).
DOWNWARD_FIELDS = frozenset(
    {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels",
     "metadata.annotations"}
)  # fmt: skip


def check_object_name(errs: Errors, path: str, value: str | None) -> None:
    """A required name of a Kubernetes object (DNS-1123 subdomain, up to 253 characters)."""
    if not value:
        errs.add(path, "is required", value)
    elif len(value) > MAX_OBJECT_NAME or not DNS1123_SUBDOMAIN.fullmatch(value):
        errs.add(path, "must be a DNS-1123 subdomain of at most 253 characters", value)


def check_secret_ref(errs: Errors, path: str, ref: LocalObjectReference | None) -> None:
    """A cloud-init secretRef/networkDataSecretRef names a Secret."""
    if ref is not None:
        check_object_name(errs, f"{path}.name", ref.name)


def _check_label(errs: Errors, path: str, label: str | None) -> None:
    if label is None:
        return
    if not label or len(label) > MAX_VOLUME_LABEL or not label.isprintable():
        errs.add(path, f"must be 1 to {MAX_VOLUME_LABEL} printable characters", label)


def _check_downward(errs: Errors, path: str, source: DownwardAPISource) -> None:
    _check_label(errs, f"{path}.volumeLabel", source.volume_label)
    seen: set[str] = set()
    for i, item in enumerate(source.fields):
        fpath = f"{path}.fields[{i}]"
        rel = item.path or ""
        parts = rel.split("/")
        if not rel or rel.startswith("/") or ".." in parts or posixpath.normpath(rel) != rel:
            errs.add(f"{fpath}.path", "must be a relative path without '..'", item.path)
        elif rel in seen:
            errs.add(f"{fpath}.path", f"duplicate path {rel!r}", rel)
        seen.add(rel)
        refs = [r for r in (item.field_ref, item.resource_field_ref) if r is not None]
        if len(refs) != 1:
            errs.add(fpath, "must set exactly one of fieldRef, resourceFieldRef")
        ref = item.field_ref
        if ref is not None and ref.field_path not in DOWNWARD_FIELDS:
            allowed = ", ".join(sorted(DOWNWARD_FIELDS))
            errs.add(f"{fpath}.fieldRef.fieldPath", f"must be one of {allowed}", ref.field_path)
        res = item.resource_field_ref
        if res is not None and not res.resource:
            errs.add(f"{fpath}.resourceFieldRef.resource", "is required")


def validate_config_volume(errs: Errors, path: str, vol: Volume) -> None:
    """The object a config volume names, its ISO label, downwardAPI's files."""
    if vol.config_map is not None:
        check_object_name(errs, f"{path}.configMap.name", vol.config_map.name)
        _check_label(errs, f"{path}.configMap.volumeLabel", vol.config_map.volume_label)
    if vol.secret is not None:
        check_object_name(errs, f"{path}.secret.secretName", vol.secret.secret_name)
        _check_label(errs, f"{path}.secret.volumeLabel", vol.secret.volume_label)
    if vol.service_account is not None:
        name = vol.service_account.service_account_name
        check_object_name(errs, f"{path}.serviceAccount.serviceAccountName", name)
    if vol.downward_api is not None:
        _check_downward(errs, f"{path}.downwardAPI", vol.downward_api)
    if vol.sysprep is not None:
        _check_sysprep(errs, f"{path}.sysprep", vol)


def _check_sysprep(errs: Errors, path: str, vol: Volume) -> None:
    """Exactly one of configMap or secret, naming its object; the disk is a CD-ROM (the
    answer file is an ISO the guest's setup looks for on its CD drives)."""
    sysprep = vol.sysprep
    if sysprep is None:
        return
    refs = [(k, r) for k, r in (("configMap", sysprep.config_map), ("secret", sysprep.secret))]
    found = [(k, r) for k, r in refs if r is not None]
    if len(found) != 1:
        errs.add(path, "must set exactly one of configMap, secret")
    for key, ref in found:
        check_object_name(errs, f"{path}.{key}.name", ref.name)


def validate_service_accounts(errs: Errors, path: str, volumes: tuple[Volume, ...]) -> None:
    """At most one serviceAccount volume (the pod runs as one account), as in KubeVirt."""
    indexes = [i for i, v in enumerate(volumes) if v.service_account is not None]
    for i in indexes[1:]:
        errs.add(
            f"{path}[{i}].serviceAccount",
            f"only one serviceAccount volume is allowed (also {path}[{indexes[0]}])",
        )
