"""The one way to derive a Kubernetes name (or label value, or certificate name) from a
user's name: keep it when it fits, else cut it and add a hash of the whole (KubeVirt's
naming habit), so every derived name fits its limit and distinct inputs stay distinct.

    fit("virt-export-" + name)              ≤ 63: a DNS-1123 label (Services, pods, claims)
    fit(name, suffix="3")                   `<name>-3`, or `<cut>-<hash>-3` when too long
    fit(name, limit=SUBDOMAIN)              ≤ 253: Secrets, VolumeSnapshots, revisions
    label_value(name)                       ≤ 63: a label's value
    common_name(service)                    ≤ 64: an X.509 subject's CN (RFC 5280 ub-common-name)

A name that fits is returned unchanged, so names KubeVirt users know (`virt-export-<name>`,
`importer-<dv>`, `<pool>-<index>`) stay as they are for every name short enough.
"""

from __future__ import annotations

import hashlib

#: A DNS-1123 label: most object names derived here, Service names, label values.
LABEL = 63
#: A DNS-1123 subdomain: the most any object name may be.
SUBDOMAIN = 253
#: RFC 5280's upper bound of a certificate subject's commonName.
COMMON_NAME = 64
#: Hex digits of the hash added to a cut name.
HASH_LEN = 8
_CUT_CHARS = "-."


def digest(text: str) -> str:
    """`HASH_LEN` lower-case hex digits of SHA-256 over `text` (valid in every name)."""
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LEN]


def fit(base: str, *, suffix: str = "", limit: int = LABEL) -> str:
    """`base-suffix` (or `base` without a suffix) if it fits `limit`; else `base` cut, a
    hash of the whole name, then the suffix: `<cut>-<hash>-<suffix>`. A suffix too long to
    keep is dropped into the hash (`<cut>-<hash>`). Never ends in '-' or '.'."""
    whole = f"{base}-{suffix}" if suffix else base
    if len(whole) <= limit:
        return whole
    tail = f"-{digest(whole)}"
    if suffix and len(suffix) + 1 + len(tail) < limit:
        tail = f"{tail}-{suffix}"
    head = base[: limit - len(tail)].rstrip(_CUT_CHARS)
    if not head:
        return tail.lstrip("-")[:limit]
    return f"{head}{tail}"


def label_value(value: str) -> str:
    """`value` as a label's value: at most 63 characters, alphanumeric at both ends (every
    Kubernetes object name is made of valid label-value characters)."""
    return fit(value.strip(_CUT_CHARS + "_"), limit=LABEL)


def common_name(name: str) -> str:
    """`name` as a certificate's commonName (at most 64 characters); the full DNS names
    belong in the subjectAltName, which has no such bound."""
    return fit(name, limit=COMMON_NAME)
