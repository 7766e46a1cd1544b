"""The VMI spec an instancetype and a preference are applied to, and the provenance of
every value they put there (so a refusal of the VMI names the instancetype field)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.model._codec import copy_json
from shared.model.errors import FieldError

# KubeVirt's message (pkg/instancetype/conflict), the field's path first.
CONFLICT = "conflicts with selected instance type"
TEMPLATE_SPEC = "spec.template.spec"


class Source(enum.StrEnum):
    """Which object a value came from (the VM's matcher of it)."""

    INSTANCETYPE = "instancetype"
    PREFERENCE = "preference"


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """One value put in the VMI: by which object, from which of its fields."""

    source: Source
    field: str  # the object's wire path, e.g. spec.memory.hugepages


def dig(obj: Any, keys: tuple[str, ...]) -> Any:
    """obj[k1][k2]…, None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def is_set(value: Any) -> bool:
    """What KubeVirt's Go zero values leave unset: None, false, 0, "" and [] (an object,
    even empty, is a pointer set)."""
    return value not in (None, False, 0, "", [])


@dataclass(slots=True)
class Target:
    """The VMI spec being expanded (a private copy), its added annotations, conflicts."""

    spec: dict[str, Any]
    annotations: dict[str, str] = field(default_factory=dict)
    template_annotations: Mapping[str, str] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)  # VMI spec path → origin
    conflicts: list[FieldError] = field(default_factory=list)

    @classmethod
    def of(cls, spec: Mapping[str, Any], annotations: Mapping[str, str]) -> Target:
        """A target over a copy of `spec`, whose template annotations are `annotations`."""
        return cls(spec=copy_json(spec), template_annotations=dict(annotations))

    def get(self, *keys: str) -> Any:
        return dig(self.spec, keys)

    def node(self, *keys: str) -> dict[str, Any]:
        """spec[k1][k2]… as a dict, made (or replaced when not an object) on the way."""
        obj = self.spec
        for key in keys:
            child = obj.get(key)
            if not isinstance(child, dict):
                child = obj[key] = {}
            obj = child
        return obj

    def put(self, keys: tuple[str, ...], value: Any, origin: Origin) -> None:
        """Set spec[keys] to a copy of `value`, remembering where it came from."""
        self.node(*keys[:-1])[keys[-1]] = copy_json(value)
        self.origins[".".join(keys)] = origin

    def note(self, path: str, origin: Origin) -> None:
        """Remember the origin of a value set in place (a list item's key)."""
        self.origins[path] = origin

    def conflict(self, *keys: str) -> None:
        """The template sets `keys`, which the instancetype owns."""
        path = ".".join((TEMPLATE_SPEC, *keys))
        self.conflicts.append(FieldError(path=path, message=f"VM field(s) {path} {CONFLICT}"))

    def annotate(self, key: str, value: str, *, owned: bool) -> None:
        """An annotation for the VMI: the instancetype's must not differ from the
        template's (`owned`), the preference's never replaces one."""
        current = self.template_annotations.get(key, self.annotations.get(key))
        if current is None:
            self.annotations[key] = value
        elif owned and current != value:
            path = f"spec.template.metadata.annotations[{key}]"
            self.conflicts.append(FieldError(path=path, message=f"VM field(s) {path} {CONFLICT}"))
