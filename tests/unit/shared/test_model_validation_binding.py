"""VMI validation of interfaces[].binding (KubeVirt's network binding plugins): a name is
required, never beside a core binding method, KubeVirt's `passt` plugin only on the pod
network, ports only for passt; the field is no longer refused as unsupported."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.unsupported import unsupported_fields
from tests.unit.shared._validation_support import (
    DELETE,
    IFACES,
    edit,
    load,
    messages_at,
    vmi_errors,
)

PLUGIN = {f"{IFACES}[0].masquerade": DELETE, f"{IFACES}[0].binding": {"name": "l2"}}
SECONDARY = {"spec.networks[0].pod": DELETE, "spec.networks[0].multus": {"networkName": "n"}}

RULES = [
    pytest.param(
        {f"{IFACES}[0].binding": {"name": "passt"}},
        f"{IFACES}[0].binding",
        "cannot have both a binding plugin and masquerade",
        id="plugin-and-core-binding",
    ),
    pytest.param(
        {**PLUGIN, f"{IFACES}[0].binding": {}},
        f"{IFACES}[0].binding.name",
        "is required",
        id="plugin-without-name",
    ),
    pytest.param(
        {**PLUGIN, f"{IFACES}[0].binding": {"name": "passt"}, **SECONDARY},
        f"{IFACES}[0].binding.name",
        "passt is only allowed on the pod network",
        id="passt-plugin-on-secondary",
    ),
    pytest.param(
        {**PLUGIN, f"{IFACES}[0].ports": [{"port": 80}]},
        f"{IFACES}[0].ports",
        "only forwarded by a masquerade or passt interface",
        id="ports-with-other-plugin",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_a_bad_binding_is_refused_at_its_path(
    changes: dict[str, Any], path: str, fragment: str
) -> None:
    """Each bad use of interfaces[].binding is reported at its field path."""
    errors = vmi_errors(changes)
    assert any(fragment in m for m in messages_at(errors, path)), [str(e) for e in errors]


def test_a_plugin_binding_validates_and_is_supported() -> None:
    """`binding: {name: passt}` with ports on the pod network is valid and not refused as
    unsupported (admission checks the name against the KubeVirt CR: shared/netbinding.py);
    it counts as passt for every daemon."""
    changes = {**PLUGIN, f"{IFACES}[0].binding": {"name": "passt"},
               f"{IFACES}[0].ports": [{"port": 80}]}  # fmt: skip
    assert vmi_errors(changes) == []
    vmi = VirtualMachineInstance.from_dict(edit(load("vmi-running.yaml"), changes))
    assert unsupported_fields(vmi) == []
    assert vmi.spec.domain.devices.interfaces[0].uses_passt()


@pytest.mark.parametrize("key", ["slirp", "passt", "macvtap"])
def test_discontinued_core_bindings_say_so(key: str) -> None:
    """The core slirp, passt and macvtap bindings KubeVirt discontinued in v1.3 (and has
    blocked at admission since) are refused with its message, naming the field."""
    changes = {f"{IFACES}[0].masquerade": DELETE, f"{IFACES}[0].{key}": {}}
    vmi = VirtualMachineInstance.from_dict(edit(load("vmi-running.yaml"), changes))
    (error,) = unsupported_fields(vmi)
    assert error.path == f"{IFACES}[0].{key}"
    assert "discontinued since v1.3" in error.message
