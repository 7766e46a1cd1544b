"""Kubernetes quantity parsing and formatting (shared.model.quantity) and time helpers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction

import pytest

from shared.model import QuantityError, format_time, now_rfc3339, parse_time
from shared.model.quantity import format_bytes, parse_bytes, parse_millis, parse_quantity


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("64Mi", 64 * 1024**2, id="binary-Mi"),
        pytest.param("1Gi", 1024**3, id="binary-Gi"),
        pytest.param("2Ki", 2048, id="binary-Ki"),
        pytest.param("1Ti", 1024**4, id="binary-Ti"),
        pytest.param("1G", 10**9, id="decimal-G"),
        pytest.param("1024M", 1024 * 10**6, id="decimal-M"),
        pytest.param("5k", 5000, id="decimal-k"),
        pytest.param("1E", 10**18, id="decimal-E-is-exa"),
        pytest.param("128974848", 128974848, id="plain-integer-string"),
        pytest.param(128974848, 128974848, id="plain-int"),
        pytest.param("129e6", 129 * 10**6, id="exponent"),
        pytest.param("12E2", 1200, id="upper-exponent"),
        pytest.param("0.5Gi", 512 * 1024**2, id="fraction-binary"),
        pytest.param(".5Ki", 512, id="leading-dot"),
        pytest.param("1.5", 2, id="fraction-rounds-up"),
        pytest.param("100m", 1, id="milli-rounds-up-to-one-byte"),
        pytest.param("+1Ki", 1024, id="explicit-plus"),
        pytest.param("-1Ki", -1024, id="negative"),
        pytest.param("0", 0, id="zero"),
    ],
)
def test_parse_bytes(value: str | int, expected: int) -> None:
    """Quantities convert to whole units, rounding fractions up as Kubernetes does."""
    assert parse_bytes(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("100m", 100, id="millicores"),
        pytest.param("2", 2000, id="cores"),
        pytest.param(1, 1000, id="int-core"),
        pytest.param("0.25", 250, id="fraction"),
        pytest.param("1u", 1, id="micro-rounds-up"),
    ],
)
def test_parse_millis(value: str | int, expected: int) -> None:
    """CPU quantities convert to millicores."""
    assert parse_millis(value) == expected


def test_parse_quantity_is_exact() -> None:
    """parse_quantity returns the exact rational value."""
    assert parse_quantity("1.5Ki") == Fraction(1536)
    assert parse_quantity("100m") == Fraction(1, 10)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("abc", id="letters"),
        pytest.param("1Zi", id="unknown-suffix"),
        pytest.param("1 Mi", id="inner-space"),
        pytest.param(" 1Mi", id="leading-space"),
        pytest.param("1Mi ", id="trailing-space"),
        pytest.param("--1", id="double-sign"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param("1e", id="bare-e-with-nothing"),
        pytest.param("1e1000", id="absurd-exponent"),
        pytest.param("Mi", id="suffix-only"),
        pytest.param("1mi", id="wrong-case"),
        pytest.param(True, id="bool"),
        pytest.param(1.5, id="float"),
        pytest.param(None, id="none"),
    ],
)
def test_malformed_quantities_raise_quantity_error(value: object) -> None:
    """Anything that is not a Kubernetes quantity raises the typed QuantityError."""
    with pytest.raises(QuantityError) as info:
        parse_bytes(value)  # type: ignore[arg-type]
    assert info.value.value == value
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        pytest.param(64 * 1024**2, "64Mi", id="mebibytes"),
        pytest.param(3 * 1024**3, "3Gi", id="gibibytes"),
        pytest.param(1536, "1536", id="not-a-whole-Ki-multiple-of-larger"),
        pytest.param(2048, "2Ki", id="kibibytes"),
        pytest.param(1000, "1000", id="plain"),
        pytest.param(0, "0", id="zero"),
    ],
)
def test_format_bytes(n: int, expected: str) -> None:
    """Bytes format as the largest exact binary suffix, else a plain integer."""
    assert format_bytes(n) == expected
    assert parse_bytes(format_bytes(n)) == n


def test_time_helpers_round_trip_rfc3339() -> None:
    """format_time renders UTC with Z; parse_time reads Z and offsets; the clock is injected."""
    t = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    assert format_time(t) == "2024-05-01T12:00:00Z"
    assert parse_time("2024-05-01T12:00:00Z") == t
    assert parse_time("2024-05-01T14:00:00+02:00") == t
    shifted = t.astimezone(timezone(timedelta(hours=5)))
    assert format_time(shifted) == "2024-05-01T12:00:00Z"
    assert now_rfc3339(lambda: t) == "2024-05-01T12:00:00Z"


def test_time_helpers_reject_naive_times() -> None:
    """Naive datetimes and zone-less timestamps are refused rather than guessed."""
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2024, 5, 1))
    with pytest.raises(ValueError, match="zone"):
        parse_time("2024-05-01T12:00:00")
