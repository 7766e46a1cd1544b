"""Validation of networks[].multus (its interface's binding: masquerade and passt are
pod-network only, checked with the interfaces)."""

from __future__ import annotations

import re

from shared.model._validate_common import Errors
from shared.model.volumes import Network

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def validate_multus(errs: Errors, path: str, net: Network) -> None:
    """`networkName` is a NAD's `name` or `namespace/name` (a default one replaces the pod
    network: validate_networks allows one primary network)."""
    if net.multus is None:
        return
    mpath = f"{path}.multus"
    name = net.multus.network_name
    if not name:
        errs.add(f"{mpath}.networkName", "is required", name)
    else:
        parts = name.split("/")
        if len(parts) > 2 or not all(p and _DNS1123_SUBDOMAIN.fullmatch(p) for p in parts):
            errs.add(
                f"{mpath}.networkName",
                "must be a NetworkAttachmentDefinition name or namespace/name",
                name,
            )
