"""Building blocks shared by the validation rules: limits, the error collector, checks
for names, paths, images and strings. Public entry points live in `validation.py`."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.model.errors import FieldError, QuantityError
from shared.model.quantity import KI, MI, TI, parse_bytes

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NAME_LENGTH = 63
# A container image reference: [host[:port]/]path[:tag][@digest], lower-case path parts.
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?/)"
IMAGE_REFERENCE = re.compile(
    rf"{_IMAGE_HOST}?{_IMAGE_COMPONENT}(?:/{_IMAGE_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
MAX_IMAGE_LENGTH = 255
# C0 controls and DEL; tab/newline/CR are allowed only in free text (user data).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL_STRICT = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationLimits:
    """Bounds validation enforces; the defaults reject absurd but not large VMs."""

    min_memory: int = MI
    max_memory: int = TI
    max_vcpus: int = 512
    max_userdata_bytes: int = 64 * KI
    # emptyDisk / hostDisk capacities (a qcow2 of 1Ei is accepted by qemu-img, then fails).
    max_disk_bytes: int = 64 * TI
    # Guests may run under emulation (TCG; the controller's --use-emulation): refuse what
    # TCG cannot run (host-passthrough, CPU models TCG lacks).
    emulation: bool = False


@dataclass(slots=True)
class Errors:
    """Collects FieldErrors in the order found."""

    items: list[FieldError] = field(default_factory=list)

    def add(self, path: str, message: str, value: Any = None) -> None:
        """Record one problem at `path`."""
        self.items.append(FieldError(path=path, message=message, value=value))


def check_name(errs: Errors, path: str, value: str | None, *, subdomain: bool = False) -> None:
    """A required DNS-1123 label (or subdomain) of at most 63 characters."""
    if not value:
        errs.add(path, "is required", value)
        return
    pattern = DNS1123_SUBDOMAIN if subdomain else DNS1123_LABEL
    kind = "subdomain" if subdomain else "label"
    if len(value) > MAX_NAME_LENGTH:
        errs.add(path, f"must be at most {MAX_NAME_LENGTH} characters", value)
    if not pattern.fullmatch(value):
        errs.add(
            path,
            f"must be a DNS-1123 {kind}: lower-case letters, digits and '-'"
            + (" and '.'" if subdomain else "")
            + ", starting and ending with a letter or digit",
            value,
        )


def check_unique_names(errs: Errors, path: str, names: list[str | None]) -> None:
    """Report every repeat of a name, pointing at the first occurrence."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not name:
            continue
        if name in first:
            errs.add(f"{path}[{i}].name", f"duplicate name {name!r} (also {path}[{first[name]}])")
        else:
            first[name] = i


def check_abs_path(errs: Errors, path: str, value: str | None, *, required: bool = True) -> None:
    """An absolute, normalised POSIX path without '..' or control characters."""
    if not value:
        if required:
            errs.add(path, "is required", value)
        return
    if _CONTROL_STRICT.search(value):
        errs.add(path, "must not contain NUL or control characters", value)
        return
    if not value.startswith("/"):
        errs.add(path, "must be an absolute path", value)
    if ".." in value.split("/"):
        errs.add(path, "must not contain '..'", value)
    elif posixpath.normpath(value) != value or value.startswith("//"):
        errs.add(path, f"must be normalised (as {posixpath.normpath(value)!r})", value)


def check_image(errs: Errors, path: str, value: str | None) -> None:
    """A required, plausible container image reference."""
    if not value or not value.strip():
        errs.add(path, "is required", value)
    elif len(value) > MAX_IMAGE_LENGTH or not IMAGE_REFERENCE.fullmatch(value):
        errs.add(path, "is not a valid image reference", value)


def check_pull_secret(errs: Errors, path: str, value: str | None) -> None:
    """An optional imagePullSecret: the name of a Secret (a DNS-1123 subdomain)."""
    if value is not None:
        check_name(errs, path, value, subdomain=True)


def check_quantity(
    errs: Errors, path: str, value: str | int | None, *, required: bool = False
) -> int | None:
    """Parse a quantity, reporting it when malformed or not positive; returns bytes."""
    if value is None:
        if required:
            errs.add(path, "is required", value)
        return None
    try:
        n = parse_bytes(value)
    except QuantityError as e:
        errs.add(path, f"is not a valid quantity: {e.message}", value)
        return None
    if n <= 0:
        errs.add(path, "must be greater than 0", value)
        return None
    return n


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def child_path(path: str, key: str) -> str:
    """`path.key`, or `path[key]` when the key is not a plain identifier (labels)."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def check_strings(errs: Errors, path: str, value: Any) -> None:
    """Every string (keys and values) under `value` is free of NUL and control characters.

    Tab, newline and carriage return are allowed here (user data is multi-line); fields
    that must be single-line are checked by their own rules.
    """
    if isinstance(value, str):
        if _CONTROL.search(value):
            errs.add(path, "must not contain NUL or control characters", value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            child = child_path(path, str(k))
            if isinstance(k, str) and _CONTROL_STRICT.search(k):
                errs.add(child, "key must not contain NUL or control characters", k)
            check_strings(errs, child, v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_strings(errs, f"{path}[{i}]", v)
