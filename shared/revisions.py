"""The VM controller's reads of instancetypes and preferences, captured in
ControllerRevisions (see shared.expansion): the first VMI of a VM reads the
objects, stores each in a revision and names it in the VM's spec.*.revisionName; every
later VMI reads the revision, so edits of the instancetype never reach an existing VM.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from shared.expansion import (
    CONTROLLER_REVISIONS,
    RESOURCES,
    matcher_kind,
    revision_body,
    revision_name,
)
from shared.kube import VMS, AlreadyExists, ApiError, NotFound, TransportError
from shared.kube.ports import GetsCreatesPatches
from shared.model import ConditionReason, ParseError, VirtualMachine
from shared.model.instancetype import InstancetypeMatcher, InstancetypeSpec, PreferenceSpec
from shared.sync import SyncError

log = structlog.get_logger("controller.vm")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expansion:
    """What a VM's VMI is expanded with."""

    instancetype: InstancetypeSpec | None = None
    preference: PreferenceSpec | None = None


async def _captured(
    client: GetsCreatesPatches,
    vm: VirtualMachine,
    matcher: InstancetypeMatcher,
    *,
    preference: bool,
    capture: bool,
) -> tuple[Mapping[str, Any], str | None]:
    """The object's data and, when it was captured just now, the new revision's name."""
    if matcher.revision_name:
        rev = await client.get(CONTROLLER_REVISIONS, matcher.revision_name, namespace=vm.namespace)
        data = rev.get("data")
        return (data if isinstance(data, Mapping) else {}), None
    resource = RESOURCES[matcher_kind(matcher, preference=preference)]
    obj = await client.get(resource, matcher.name or "", namespace=vm.namespace)
    if not capture:
        return obj, None
    # AlreadyExists: captured by an earlier sync whose VM patch was lost (same name, same data)
    with contextlib.suppress(AlreadyExists):
        await client.create(CONTROLLER_REVISIONS, revision_body(vm, obj), namespace=vm.namespace)
    return obj, revision_name(vm, obj)


async def _resolve(
    client: GetsCreatesPatches, vm: VirtualMachine, key: str, *, preference: bool, capture: bool
) -> tuple[Mapping[str, Any] | None, str | None]:
    matcher = vm.spec.preference if preference else vm.spec.instancetype
    if matcher is None:
        return None, None
    what = f"{matcher_kind(matcher, preference=preference)} {matcher.name!r}"
    try:
        return await _captured(client, vm, matcher, preference=preference, capture=capture)
    except NotFound as e:
        rev = f" (revision {matcher.revision_name!r})" if matcher.revision_name else ""
        raise SyncError(ConditionReason.FAILED_CREATE, f"spec.{key}: {what}{rev} not found") from e
    except (ApiError, TransportError) as e:
        raise SyncError(ConditionReason.FAILED_CREATE, f"spec.{key}: {what}: {e}") from e


def _spec(data: Mapping[str, Any] | None, cls: type[Any], key: str) -> Any:
    if data is None:
        return None
    try:
        return cls.from_dict(data.get("spec") or {})
    except ParseError as e:
        raise SyncError(ConditionReason.FAILED_CREATE, f"spec.{key}: {e}", requeue=False) from e


async def expansion(
    client: GetsCreatesPatches, vm: VirtualMachine, *, capture: bool = True
) -> Expansion:
    """The VM's instancetype and preference, captured in revisions on first use (with
    `capture` False only read: the revision when there is one, else the object itself)."""
    it_data, it_rev = await _resolve(client, vm, "instancetype", preference=False, capture=capture)
    pref_data, pref_rev = await _resolve(client, vm, "preference", preference=True, capture=capture)
    patch: dict[str, Any] = {}
    if it_rev is not None:
        patch["instancetype"] = {"revisionName": it_rev}
    if pref_rev is not None:
        patch["preference"] = {"revisionName": pref_rev}
    if patch:
        try:
            await client.patch(VMS, vm.name, {"spec": patch}, namespace=vm.namespace)
        except (ApiError, TransportError) as e:
            raise SyncError(ConditionReason.FAILED_UPDATE, f"VM {vm.key}: {e}") from e
        log.info("vm_revisions_captured", **{k: v["revisionName"] for k, v in patch.items()})
    return Expansion(
        instancetype=_spec(it_data, InstancetypeSpec, "instancetype"),
        preference=_spec(pref_data, PreferenceSpec, "preference"),
    )
