"""VMI validation rules for kernel boot, interfaces/networks and string hygiene."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.shared._validation_support import (
    DELETE,
    IFACES,
    KB,
    messages_at,
    vmi_errors,
)

RULES = [
    # kernel boot
    pytest.param(
        {f"{KB}.container": DELETE}, f"{KB}.container", "is required", id="kernel-boot-no-container"
    ),
    pytest.param(
        {f"{KB}.container.image": DELETE},
        f"{KB}.container.image",
        "is required",
        id="kernel-boot-no-image",
    ),
    pytest.param(
        {f"{KB}.container.kernelPath": DELETE, f"{KB}.container.initrdPath": DELETE},
        f"{KB}.container",
        "kernelPath, initrdPath or both",
        id="kernel-boot-no-paths",
    ),
    pytest.param(
        {f"{KB}.container.kernelPath": "boot/vmlinuz"},
        f"{KB}.container.kernelPath",
        "absolute",
        id="kernel-path-relative",
    ),
    pytest.param(
        {f"{KB}.container.initrdPath": "/boot/../../etc/passwd"},
        f"{KB}.container.initrdPath",
        "'..'",
        id="initrd-path-dotdot",
    ),
    pytest.param(
        {f"{KB}.kernelArgs": "console=ttyS0\ninit=/bin/sh"},
        f"{KB}.kernelArgs",
        "single line",
        id="kernel-args-newline",
    ),
    # interfaces and networks
    pytest.param(
        {f"{IFACES}[0].ports": [{"port": 70000}]},
        f"{IFACES}[0].ports[0].port",
        "1-65535",
        id="port-out-of-range",
    ),
    pytest.param(
        {f"{IFACES}[0].ports": [{"port": 53, "protocol": "SCTP"}]},
        f"{IFACES}[0].ports[0].protocol",
        "TCP or UDP",
        id="port-protocol",
    ),
    pytest.param(
        {
            f"{IFACES}[0].masquerade": DELETE,
            f"{IFACES}[0].bridge": {},
            f"{IFACES}[0].ports": [{"port": 80}],
        },
        f"{IFACES}[0].ports",
        "only forwarded by a masquerade or passt interface",
        id="ports-without-masquerade",
    ),
    pytest.param(
        {"spec.networks[0].name": "other"},
        f"{IFACES}[0].name",
        "no network named 'default'",
        id="interface-without-network",
    ),
    pytest.param(
        {"spec.networks[0].name": "other"},
        "spec.networks[0].name",
        "network 'other' has no interface",
        id="network-without-interface",
    ),
    pytest.param(
        {f"{IFACES}[0].bridge": {}},
        f"{IFACES}[0]",
        "exactly one binding method, e.g. masquerade or bridge (found masquerade, bridge)",
        id="two-bindings",
    ),
    pytest.param(
        {f"{IFACES}[0].masquerade": DELETE}, f"{IFACES}[0]", "exactly one binding", id="no-binding"
    ),
    pytest.param(
        {f"{IFACES}[0].model": "ne2000"},
        f"{IFACES}[0].model",
        "e1000, e1000e",
        id="interface-model",
    ),
    pytest.param(
        {f"{IFACES}[0].macAddress": "02:00:00:aa:bb"},
        f"{IFACES}[0].macAddress",
        "not a valid MAC",
        id="mac-short",
    ),
    pytest.param(
        {f"{IFACES}[0].macAddress": "02:00-00:aa:bb:cc"},
        f"{IFACES}[0].macAddress",
        "not a valid MAC",
        id="mac-mixed-separators",
    ),
    pytest.param(
        {f"{IFACES}[0].name": "Default!"},
        f"{IFACES}[0].name",
        "DNS-1123",
        id="interface-name-invalid",
    ),
    pytest.param(
        {f"{IFACES}[1]": {"name": "default", "bridge": {}}},
        f"{IFACES}[1].name",
        "duplicate name 'default'",
        id="interface-name-duplicate",
    ),
    pytest.param(
        {
            f"{IFACES}[1]": {"name": "second", "bridge": {}},
            "spec.networks[1]": {"name": "second", "pod": {}},
        },
        "spec.networks[1].pod",
        "primary network is already spec.networks[0]",
        id="pod-network-twice",
    ),
    pytest.param(
        {"spec.networks[0].pod": DELETE},
        "spec.networks[0]",
        "exactly one network source",
        id="network-no-source",
    ),
    pytest.param(
        {"spec.networks[0].multus": {"networkName": "x"}},
        "spec.networks[0]",
        "found pod, multus",
        id="network-two-sources",
    ),
    pytest.param(
        {
            f"{IFACES}[1]": {"name": "second", "masquerade": {}},
            "spec.networks[1]": {"name": "second", "multus": {"networkName": "x"}},
        },
        f"{IFACES}[1].masquerade",
        "only allowed on the pod network",
        id="masquerade-off-pod-network",
    ),
    pytest.param(
        {
            f"{IFACES}[1]": {"name": "second", "bridge": {}},
            "spec.networks[1]": {"name": "second", "multus": {"networkName": "a/b/c"}},
        },
        "spec.networks[1].multus.networkName",
        "NetworkAttachmentDefinition name or namespace/name",
        id="multus-bad-network-name",
    ),
    pytest.param(
        {
            f"{IFACES}[1]": {"name": "second", "bridge": {}},
            "spec.networks[1]": {"name": "second", "multus": {}},
        },
        "spec.networks[1].multus.networkName",
        "is required",
        id="multus-no-network-name",
    ),
    pytest.param(
        {
            f"{IFACES}[1]": {"name": "second", "bridge": {}},
            "spec.networks[1]": {"name": "second", "multus": {"networkName": "x", "default": True}},
        },
        "spec.networks[1].multus.default",
        "primary network is already spec.networks[0]",
        id="multus-default-beside-the-pod-network",
    ),
    pytest.param(
        {
            f"{IFACES}[1]": {"name": "second", "passtBinding": {}},
            "spec.networks[1]": {"name": "second", "multus": {"networkName": "x"}},
        },
        f"{IFACES}[1].passtBinding",
        "pod network or a multus default network",
        id="passt-off-the-primary-network",
    ),
    pytest.param(
        {"spec.networks[0].pod.vmNetworkCIDR": "10.0.2.0/33"},
        "spec.networks[0].pod.vmNetworkCIDR",
        "not a valid IPv4 CIDR",
        id="bad-cidr",
    ),
    pytest.param(
        {"spec.networks[0].pod.vmNetworkCIDR": "fd00::/64"},
        "spec.networks[0].pod.vmNetworkCIDR",
        "IPv4",
        id="ipv6-cidr",
    ),
    pytest.param(
        {"spec.networks[0].pod.vmNetworkCIDR": "10.9.0.0/31"},
        "spec.networks[0].pod.vmNetworkCIDR",
        "no room for the gateway and the guest",
        id="cidr-too-small",
    ),
    # misc
    pytest.param(
        {"spec.terminationGracePeriodSeconds": -1},
        "spec.terminationGracePeriodSeconds",
        "must not be negative",
        id="grace-negative",
    ),
    pytest.param(
        {"spec.domain.firmware.uuid": "abc\x07"},
        "spec.domain.firmware.uuid",
        "control",
        id="control-char-in-untyped-field",
    ),
    pytest.param(
        {"spec.nodeSelector.zone": "a\x00"},
        "spec.nodeSelector.zone",
        "control",
        id="control-char-in-node-selector",
    ),
    pytest.param(
        {"spec.domain.machine.type": "q35\x7f"},
        "spec.domain.machine.type",
        "control",
        id="del-char",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_rule_reports_problem_at_path(changes: dict[str, Any], path: str, fragment: str) -> None:
    """Each broken rule is reported at its field path with an explaining message."""
    errors = vmi_errors(changes)
    found = messages_at(errors, path)
    assert any(fragment in m for m in found), (path, [str(e) for e in errors])
