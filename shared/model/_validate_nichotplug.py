"""Validation of interfaces[].state `absent` (KubeVirt's NIC hot-unplug): only a
bridge-bound interface on a multus network can be unplugged, as in KubeVirt."""

from __future__ import annotations

from shared.model._validate_common import Errors
from shared.model.devopts import LinkState
from shared.model.vmi import VMISpec


def validate_unplug(errs: Errors, path: str, spec: VMISpec) -> None:
    """Each interface marked absent is bridge-bound on a (non-default) multus network."""
    for i, iface in enumerate(spec.domain.devices.interfaces):
        if iface.state != LinkState.ABSENT:
            continue
        net = spec.network(iface.name or "")
        multus = net is not None and net.multus is not None and not net.multus.default
        if iface.bridge is None or not multus:
            errs.add(
                f"{path}[{i}].state",
                "absent (a hot-unplug) needs a bridge-bound interface on a multus network",
                iface.state,
            )
