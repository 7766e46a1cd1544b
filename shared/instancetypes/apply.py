"""An instancetype and a preference applied to a VM's template spec, in KubeVirt's order
(the instancetype first: its conflicts stop everything; then the preference), and the
errors of the VMI made so named after the instancetype or preference field behind them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.instancetypes.prefer import apply_preference
from shared.instancetypes.sizing import apply_instancetype
from shared.instancetypes.target import Origin, Source, Target
from shared.model.errors import FieldError
from shared.model.instancetype import InstancetypeSpec
from shared.model.preference import PreferenceSpec

APPLIED = "with the VM's instancetype and preference applied"


@dataclass(frozen=True, slots=True, kw_only=True)
class Expanded:
    """A VMI spec with an instancetype and a preference applied."""

    spec: dict[str, Any]
    annotations: Mapping[str, str]  # to add to the VMI's metadata
    origins: Mapping[str, Origin]  # VMI spec path (no `spec.`) → where its value came from
    conflicts: tuple[FieldError, ...]  # non-empty: the instancetype was not applied


def expand(
    spec: Mapping[str, Any],
    *,
    annotations: Mapping[str, str] | None = None,
    instancetype: InstancetypeSpec | None,
    preference: PreferenceSpec | None,
) -> Expanded:
    """`spec` (a VM's template spec, whose metadata has `annotations`) expanded."""
    target = Target.of(spec, annotations or {})
    if instancetype is not None:
        apply_instancetype(target, instancetype, preference)
    if preference is not None and not target.conflicts:
        apply_preference(target, preference)
    return Expanded(
        spec=target.spec,
        annotations=dict(target.annotations),
        origins=dict(target.origins),
        conflicts=tuple(target.conflicts),
    )


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith((f"{parent}.", f"{parent}["))


def _origins_of(path: str, origins: Mapping[str, Origin]) -> list[Origin]:
    """The origin of the longest recorded path `path` is at or under; else those of every
    recorded path under `path` (an error on an object the objects filled in)."""
    best: tuple[int, Origin] | None = None
    for key, origin in origins.items():
        if _under(path, key) and (best is None or len(key) > best[0]):
            best = (len(key), origin)
    if best is not None:
        return [best[1]]
    below = [origins[key] for key in sorted(origins) if _under(key, path)]
    return list(dict.fromkeys(below))


def attribute(
    errors: Iterable[FieldError], expanded: Expanded, *, names: Mapping[Source, str]
) -> list[FieldError]:
    """Errors of the expanded VMI (paths `spec.…`) as the VM's: each named after the
    instancetype or preference field that put the value there (`names` says how to call
    each object, e.g. `VirtualMachineClusterPreference "fedora"`)."""
    out = []
    for error in errors:
        relative = error.path.removeprefix("spec.")
        vm_path = f"spec.template.{error.path}"
        found = _origins_of(relative, expanded.origins)
        if not found:
            message = f"{error.message} ({APPLIED})"
            out.append(FieldError(path=vm_path, message=message, value=error.value))
        for origin in found:
            who = names.get(origin.source, str(origin.source))
            message = f"{who} field {origin.field} sets {vm_path}: {error.message}"
            path = f"spec.{origin.source}"
            out.append(FieldError(path=path, message=message, value=error.value))
    return out
