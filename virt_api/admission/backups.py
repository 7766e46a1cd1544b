"""Admission of backup.kubevirt.io objects (KubeVirt's CEL rules on the CRDs, here so the
refusal names the field): refusals at the earliest layer.

- VirtualMachineBackup: the source is a kubevirt.io VirtualMachine or a backup.kubevirt.io
  VirtualMachineBackupTracker, with a name; pvcName is a claim's name (push mode, the only
  one served: Pull, and the fields only it reads, are refused naming the field); the spec
  never changes.
- VirtualMachineBackupTracker: the source is a kubevirt.io VirtualMachine with a name; the
  spec never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.model import FieldError
from shared.model._validate_common import DNS1123_SUBDOMAIN
from shared.model.backup import (
    BackupMode,
    VirtualMachineBackup,
    VirtualMachineBackupTracker,
    is_tracker_ref,
    is_vm_ref,
)
from shared.model.validation import ValidationLimits

BACKUP_KINDS = (VirtualMachineBackup.KIND, VirtualMachineBackupTracker.KIND)
MAX_CLAIM_NAME = 253


def validate_backup(backup: VirtualMachineBackup, _: ValidationLimits) -> list[FieldError]:
    """The source, pvcName, and push mode."""
    spec = backup.spec
    source = spec.source
    errors = []
    if not (is_vm_ref(source) or is_tracker_ref(source)):
        errors.append(
            FieldError(
                path="spec.source.kind",
                message="a kubevirt.io VirtualMachine or a backup.kubevirt.io "
                "VirtualMachineBackupTracker is required (apiGroup and kind)",
                value=f"{source.api_group or ''}/{source.kind or ''}",
            )
        )
    if not source.name:
        errors.append(FieldError(path="spec.source.name", message="required"))
    errors += _claim_errors(spec.pvc_name)
    if spec.mode not in (None, BackupMode.PUSH):
        errors.append(
            FieldError(
                path="spec.mode",
                message="only Push is supported (Pull mode's endpoint is not served)",
                value=spec.mode,
            )
        )
    for path, value in (
        ("spec.tokenSecretRef", spec.token_secret_ref),
        ("spec.ttlDuration", spec.ttl_duration),
    ):
        if value:
            message = "only read in Pull mode, which is not supported"
            errors.append(FieldError(path=path, message=message, value=value))
    return errors


def _claim_errors(name: str | None) -> list[FieldError]:
    if not name:
        return [FieldError(path="spec.pvcName", message="required (the claim the backup goes to)")]
    if len(name) > MAX_CLAIM_NAME or not DNS1123_SUBDOMAIN.fullmatch(name):
        message = "must be a claim's name (a DNS-1123 subdomain)"
        return [FieldError(path="spec.pvcName", message=message, value=name)]
    return []


def validate_tracker(tracker: VirtualMachineBackupTracker, _: ValidationLimits) -> list[FieldError]:
    """The source is a kubevirt.io VirtualMachine with a name."""
    source = tracker.spec.source
    errors = []
    if not is_vm_ref(source):
        errors.append(
            FieldError(
                path="spec.source.kind",
                message="a kubevirt.io VirtualMachine is required (apiGroup and kind)",
                value=f"{source.api_group or ''}/{source.kind or ''}",
            )
        )
    if not source.name:
        errors.append(FieldError(path="spec.source.name", message="required"))
    return errors


def backup_spec_changed(
    kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[FieldError]:
    """Backups and trackers are immutable once made (KubeVirt's `self == oldSelf`)."""
    if kind in BACKUP_KINDS and old is not None and obj.get("spec") != old.get("spec"):
        return [FieldError(path="spec", message="cannot be changed once created")]
    return []
