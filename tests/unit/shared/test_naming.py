"""shared.naming: names that fit stay as they are; longer ones are cut with a hash so they
fit their limit, stay valid, are deterministic, and distinct inputs stay distinct."""

from __future__ import annotations

import re

import pytest

from shared.naming import COMMON_NAME, LABEL, SUBDOMAIN, common_name, fit, label_value

SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LONG = "a" * 120


def test_a_name_that_fits_is_unchanged() -> None:
    """KubeVirt's familiar names stay as they are while they fit."""
    assert fit("virt-export-x") == "virt-export-x"
    assert fit("pool", suffix="3") == "pool-3"
    assert fit("a" * 63) == "a" * 63
    assert label_value("vm1") == "vm1"
    assert common_name("svc") == "svc"


@pytest.mark.parametrize("limit", [LABEL, COMMON_NAME, SUBDOMAIN, 20, 12])
@pytest.mark.parametrize("suffix", ["", "3", "certs", "x" * 40])
def test_a_long_name_fits_and_is_valid(limit: int, suffix: str) -> None:
    """Cut names fit the limit, are DNS-1123 subdomains and never end in '-' or '.'."""
    base = "ab-c." * 70 + "z"
    out = fit(base, suffix=suffix, limit=limit)
    assert len(out) <= limit
    assert SUBDOMAIN_RE.fullmatch(out), out
    assert out == fit(base, suffix=suffix, limit=limit)


def test_a_short_suffix_is_kept_after_the_hash() -> None:
    """`<cut>-<hash>-<suffix>`: a pool member still ends in its index."""
    out = fit(LONG, suffix="12")
    assert len(out) == LABEL
    assert out.endswith("-12")
    assert re.fullmatch(r"a+-[0-9a-f]{8}-12", out)


def test_distinct_inputs_stay_distinct() -> None:
    """Names differing only past the cut (or only in the suffix) give distinct outputs."""
    names = {fit(LONG + f"{i:03d}") for i in range(200)}
    assert len(names) == 200
    members = {fit(LONG, suffix=str(i)) for i in range(200)}
    assert len(members) == 200


def test_label_values_and_common_names() -> None:
    """A label value ≤ 63 and alphanumeric at its ends; a CN ≤ 64."""
    value = label_value("x" * 252 + ".")
    assert len(value) <= LABEL and value[0].isalnum() and value[-1].isalnum()
    assert len(common_name("s" * 63 + ".namespace.svc")) <= COMMON_NAME
