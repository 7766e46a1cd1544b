"""Validation of the guest's devices, clock and features (KubeVirt's rules): every bad
value is refused naming its field; KubeVirt's own vmi-windows example is admitted."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shared.model import VirtualMachineInstance
from shared.model.unsupported import unsupported_fields
from shared.model.validation import ValidationLimits, validate_vmi
from tests.unit.shared._validation_support import edit, load

TCG = ValidationLimits(emulation=True)
DEV = "spec.domain.devices"
FEAT = "spec.domain.features"
CLOCK = "spec.domain.clock"


def _errors(changes: dict[str, Any]) -> dict[str, str]:
    vmi = VirtualMachineInstance.from_dict(edit(load("vmi-kernel-boot.yaml"), changes))
    problems = [*validate_vmi(vmi, limits=TCG), *unsupported_fields(vmi)]
    return {e.path: e.message for e in problems}


VALID = [
    pytest.param({f"{DEV}.inputs": [{"name": "t", "type": "tablet"}]}, id="tablet"),
    pytest.param(
        {f"{DEV}.inputs": [{"name": "k", "type": "keyboard", "bus": "virtio"}]}, id="keyboard"
    ),
    pytest.param({f"{DEV}.watchdog": {"name": "w", "i6300esb": {}}}, id="watchdog"),
    pytest.param(
        {f"{DEV}.watchdog": {"name": "w", "i6300esb": {"action": "shutdown"}}},
        id="watchdog-shutdown",
    ),
    pytest.param({f"{DEV}.panicDevices": [{}, {"model": "hyperv"}]}, id="panic"),
    pytest.param({f"{DEV}.video": {"type": "bochs"}}, id="video"),
    pytest.param({f"{DEV}.sound": {"name": "s"}}, id="sound"),
    pytest.param({CLOCK: {"timezone": "America/New_York"}}, id="timezone"),
    pytest.param(
        {CLOCK: {"utc": {"offsetSeconds": -7200}, "timer": {"rtc": {"track": "wall"}}}},
        id="utc-offset",
    ),
    pytest.param(
        {
            FEAT: {
                "hyperv": {
                    "synic": {},
                    "synictimer": {"direct": {}},
                    "vendorid": {"vendorid": "KubeVirt"},
                    "tlbflush": {},
                },
            }
        },
        id="hyperv",
    ),
    pytest.param(
        {FEAT: {"hyperv": {"tlbflush": {"direct": {}, "extended": {"enabled": False}}}}},
        id="hyperv-tlbflush-modes",
    ),
    pytest.param({FEAT: {"hypervPassthrough": {}}}, id="hyperv-passthrough"),
    pytest.param({FEAT: {"acpi": {"enabled": False}, "apic": {}}}, id="acpi-off"),
]


@pytest.mark.parametrize("changes", VALID)
def test_devices_clock_features_admitted(changes: dict[str, Any]) -> None:
    """Each of these is accepted (and none is refused as unsupported)."""
    assert _errors(changes) == {}


REFUSED = [
    pytest.param({f"{DEV}.inputs": [{"name": "m", "type": "mouse"}]}, f"{DEV}.inputs[0].type",
                 id="input-type"),
    pytest.param({f"{DEV}.inputs": [{"name": "m"}]}, f"{DEV}.inputs[0].type", id="input-no-type"),
    pytest.param({f"{DEV}.inputs": [{"name": "t", "type": "tablet", "bus": "ps2"}]},
                 f"{DEV}.inputs[0].bus", id="input-bus"),
    pytest.param({f"{DEV}.inputs": [{"type": "tablet"}]}, f"{DEV}.inputs[0].name",
                 id="input-name"),
    pytest.param({f"{DEV}.watchdog": {"name": "w", "i6300esb": {"action": "pause"}}},
                 f"{DEV}.watchdog.i6300esb.action", id="watchdog-action"),
    pytest.param({f"{DEV}.watchdog": {"name": "w"}}, f"{DEV}.watchdog.i6300esb",
                 id="watchdog-no-device"),
    pytest.param({f"{DEV}.watchdog": {"i6300esb": {}}}, f"{DEV}.watchdog.name",
                 id="watchdog-name"),
    pytest.param({f"{DEV}.panicDevices": [{"model": "s390"}]}, f"{DEV}.panicDevices[0].model",
                 id="panic-model"),
    pytest.param({f"{DEV}.panicDevices": [{}, {"model": "isa"}]},
                 f"{DEV}.panicDevices[1].model", id="panic-duplicate"),
    pytest.param({f"{DEV}.video": {"type": "qxl"}}, f"{DEV}.video.type", id="video-type"),
    pytest.param({f"{DEV}.video": {"type": "vga"}, f"{DEV}.autoattachGraphicsDevice": False},
                 f"{DEV}.video", id="video-without-graphics"),
    pytest.param({f"{DEV}.sound": {"name": "s", "model": "sb16"}}, f"{DEV}.sound.model",
                 id="sound-model"),
    pytest.param({f"{DEV}.sound": {"model": "ich9"}}, f"{DEV}.sound.name", id="sound-name"),
    pytest.param({CLOCK: {"utc": {}, "timezone": "UTC"}}, CLOCK, id="utc-and-timezone"),
    pytest.param({CLOCK: {"timezone": "Mars/Olympus"}}, f"{CLOCK}.timezone", id="timezone"),
    pytest.param({CLOCK: {"timezone": "../etc/passwd"}}, f"{CLOCK}.timezone",
                 id="timezone-path"),
    pytest.param({CLOCK: {"timer": {"hpet": {"tickPolicy": "later"}}}},
                 f"{CLOCK}.timer.hpet.tickPolicy", id="hpet-tick"),
    pytest.param({CLOCK: {"timer": {"pit": {"tickPolicy": "merge"}}}},
                 f"{CLOCK}.timer.pit.tickPolicy", id="pit-tick"),
    pytest.param({CLOCK: {"timer": {"rtc": {"tickPolicy": "discard"}}}},
                 f"{CLOCK}.timer.rtc.tickPolicy", id="rtc-tick"),
    pytest.param({CLOCK: {"timer": {"rtc": {"track": "host"}}}}, f"{CLOCK}.timer.rtc.track",
                 id="rtc-track"),
    pytest.param({CLOCK: {"timer": {"kvm": {"tickPolicy": "delay"}}}},
                 f"{CLOCK}.timer.kvm.tickPolicy", id="kvm-timer-unknown-key"),
    pytest.param({FEAT: {"hyperv": {"spinlocks": {"spinlocks": 100}}}},
                 f"{FEAT}.hyperv.spinlocks.spinlocks", id="spinlocks"),
    pytest.param({FEAT: {"hyperv": {"vendorid": {"vendorid": "ThirteenChars"}}}},
                 f"{FEAT}.hyperv.vendorid.vendorid", id="vendorid"),
    pytest.param({FEAT: {"hyperv": {"synic": {}, "vpindex": {"enabled": False}}}},
                 f"{FEAT}.hyperv.synic", id="synic-needs-vpindex"),
    pytest.param({FEAT: {"hyperv": {"evmcs": {}, "vapic": {"enabled": False}}}},
                 f"{FEAT}.hyperv.evmcs", id="evmcs-needs-vapic"),
    pytest.param({FEAT: {"hyperv": {"relaxed": {}}, "hypervPassthrough": {}}},
                 f"{FEAT}.hyperv", id="hyperv-and-passthrough"),
    pytest.param({FEAT: {"hyperv": {"relaxd": {}}}}, f"{FEAT}.hyperv.relaxd",
                 id="hyperv-typo"),
    pytest.param({f"{DEV}.panicDevices": [{"model": "pvpanic"}]},
                 f"{DEV}.panicDevices[0].model", id="panic-pci-model"),
    pytest.param({FEAT: {"hyperv": {"vendorid": {"vendorid": "a,b"}}}},
                 f"{FEAT}.hyperv.vendorid.vendorid", id="vendorid-comma"),
    pytest.param({FEAT: {"hyperv": {"tlbflush": {"enabled": False, "direct": {}}}}},
                 f"{FEAT}.hyperv.tlbflush.direct", id="tlbflush-direct-without-tlbflush"),
    pytest.param({FEAT: {"hyperv": {"tlbflush": {"enabled": False, "extended": {}}}}},
                 f"{FEAT}.hyperv.tlbflush.extended", id="tlbflush-extended-without-tlbflush"),
    pytest.param({FEAT: {"hyperv": {"tlbflush": {"direct": {}}, "vapic": {"enabled": False}}}},
                 f"{FEAT}.hyperv.tlbflush.direct", id="tlbflush-direct-needs-vapic"),
    pytest.param({FEAT: {"hyperv": {"tlbflush": {"extended": {"enabled": "yes"}}}}},
                 f"{FEAT}.hyperv.tlbflush.extended.enabled", id="tlbflush-extended-type"),
    pytest.param({FEAT: {"hyperv": {"tlbflush": {"direct": {"on": True}}}}},
                 f"{FEAT}.hyperv.tlbflush.direct.on", id="tlbflush-direct-unknown-key"),
    pytest.param({FEAT: {"kvm": {"hidden": "yes"}}}, f"{FEAT}.kvm.hidden", id="kvm-hidden-type"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "path"), REFUSED)
def test_bad_devices_clock_features_refused(changes: dict[str, Any], path: str) -> None:
    """Each bad value is refused, naming its field."""
    try:
        found = _errors(changes)
    except Exception as exc:  # a wrongly typed value fails parsing, naming the field
        assert path in str(exc)
        return
    assert path in found, found


WINDOWS_EXAMPLE = """
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {labels: {special: vmi-windows}, name: vmi-windows, namespace: default}
spec:
  domain:
    clock:
      timer:
        hpet: {present: false}
        hyperv: {}
        pit: {tickPolicy: delay}
        rtc: {tickPolicy: catchup}
      utc: {}
    cpu: {cores: 2}
    devices:
      disks: [{disk: {bus: sata}, name: pvcdisk}]
      interfaces: [{masquerade: {}, model: e1000, name: default}]
    features:
      acpi: {}
      apic: {}
      hyperv:
        relaxed: {}
        spinlocks: {spinlocks: 8191}
        vapic: {}
    firmware: {uuid: 5d307ca9-b3ef-428c-8861-06e72d69f223}
    resources: {requests: {memory: 2Gi}}
  networks: [{name: default, pod: {}}]
  terminationGracePeriodSeconds: 0
  volumes: [{name: pvcdisk, persistentVolumeClaim: {claimName: disk-windows}}]
"""


def test_kubevirt_vmi_windows_example_admitted() -> None:
    """KubeVirt's examples/vmi-windows.yaml (clock, timers, Hyper-V) passes validation and
    the unsupported-field check, even where the node only emulates."""
    vmi = VirtualMachineInstance.from_dict(yaml.safe_load(WINDOWS_EXAMPLE))
    assert validate_vmi(vmi, limits=TCG) == []
    assert unsupported_fields(vmi) == []
