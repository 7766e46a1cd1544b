"""Kubernetes resource quantities ("64Mi", "1G", "129e6", "0.5Gi", "100m") as exact numbers.

Quantities stay strings (or ints) on the wire so objects round-trip exactly; the daemons
convert at the point of use: `parse_bytes` for memory and disk sizes, `parse_millis` for
CPU. Like Kubernetes' `Value()`/`MilliValue()`, fractions round up (away from zero).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from shared.model.errors import QuantityError

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_RE = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)
# Kubernetes rejects exponents this large; the cap keeps Fraction arithmetic cheap.
_MAX_EXPONENT = 64

KI = 1024
MI = 1024**2
GI = 1024**3
TI = 1024**4


def parse_quantity(value: str | int) -> Fraction:
    """The exact value of a quantity; raises QuantityError for anything else."""
    if isinstance(value, bool):
        raise QuantityError(value, "a boolean is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if not isinstance(value, str):
        raise QuantityError(value, f"expected string or integer, got {type(value).__name__}")
    match = _RE.fullmatch(value.strip()) if value == value.strip() else None
    if match is None:
        raise QuantityError(value)
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(value, "exponent out of range")
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * Fraction(1024) ** _BINARY[suffix]
    return number * Fraction(10) ** _DECIMAL[suffix]


def _round_up(value: Fraction) -> int:
    """Round away from zero, as Kubernetes' Quantity.Value() does."""
    return math.ceil(value) if value >= 0 else math.floor(value)


def parse_bytes(value: str | int) -> int:
    """A quantity as whole units (bytes for memory/disk), rounded up."""
    return _round_up(parse_quantity(value))


def parse_millis(value: str | int) -> int:
    """A quantity in thousandths (millicores for CPU), rounded up."""
    return _round_up(parse_quantity(value) * 1000)


def format_bytes(n: int) -> str:
    """Bytes as the shortest exact binary quantity: 67108864 → "64Mi", 1000 → "1000"."""
    if n == 0:
        return "0"
    for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
        unit = 1024**power
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)
