"""Typed errors of the kubevirt.io/v1 model: one base class, raised at the dict edge.

Parsing (`from_dict`) raises `ParseError` with the JSON path of the offending value;
quantity parsing raises `QuantityError`; `InvalidObject` carries every `FieldError`
that validation found so callers can reject an object with one exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ModelError(Exception):
    """Base class of every error raised by `shared.model`."""


class ParseError(ModelError, ValueError):
    """A wire dict does not have the shape the model expects at `path`."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or '<root>'}: {message}")
        self.path = path
        self.message = message


class QuantityError(ModelError, ValueError):
    """A Kubernetes resource quantity could not be parsed."""

    def __init__(self, value: object, message: str = "not a valid quantity") -> None:
        super().__init__(f"{value!r}: {message}")
        self.value = value
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldError:
    """One validation problem: the JSON field path, what is wrong, and the offending value."""

    path: str
    message: str
    value: Any = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InvalidObject(ModelError, ValueError):
    """An object failed validation; `errors` lists every problem found."""

    kind = "object"

    def __init__(self, errors: Sequence[FieldError], *, name: str = "") -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.name = name
        fields = ", ".join(e.path for e in self.errors)
        detail = "; ".join(str(e) for e in self.errors)
        label = f"{self.kind} {name!r}" if name else self.kind
        super().__init__(f"invalid {label}: {len(self.errors)} problem(s) in {fields}: {detail}")


class InvalidVMI(InvalidObject):
    """A VirtualMachineInstance failed validation."""

    kind = "VirtualMachineInstance"


class InvalidVM(InvalidObject):
    """A VirtualMachine failed validation."""

    kind = "VirtualMachine"


class InvalidMigration(InvalidObject):
    """A VirtualMachineInstanceMigration failed validation."""

    kind = "VirtualMachineInstanceMigration"
