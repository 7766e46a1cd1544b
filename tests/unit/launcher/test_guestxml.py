"""The domain XML of the guest's clock, features and devices (inputs, watchdog, panic,
video, sound, balloon, serial console): from a VMI through launcher/guestplan.py, golden
output, libvirt's schema, and KVM-only settings refused on an emulating node."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.domxml import DomainPlan, build
from launcher.errors import HypervisorUnsupported
from launcher.guestplan import guest_extras, require_runnable
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN
from tests.unit.shared.test_validate_devices import WINDOWS_EXAMPLE

GOLDEN = Path(__file__).parent / "golden" / "devices-domain.xml"

DEVICES: dict[str, Any] = {
    "inputs": [
        {"name": "tablet0", "type": "tablet"},
        {"name": "kbd", "type": "keyboard", "bus": "virtio"},
    ],
    "watchdog": {"name": "wd", "i6300esb": {"action": "poweroff"}},
    "panicDevices": [{"model": "isa"}],
    "video": {"type": "virtio"},
    "sound": {"name": "audio", "model": "ac97"},
    "autoattachMemBalloon": False,
}
CLOCK: dict[str, Any] = {
    "utc": {"offsetSeconds": 3600},
    "timer": {
        "hpet": {"present": False},
        "pit": {"tickPolicy": "delay"},
        "rtc": {"tickPolicy": "catchup", "track": "guest"},
    },
}
FEATURES: dict[str, Any] = {"acpi": {}, "apic": {"endOfInterrupt": True}}


def _vmi(domain: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "v", "namespace": "default"}, "spec": {"domain": domain}}
    )


def _plan(domain: dict[str, Any], *, virt_type: str = "qemu") -> DomainPlan:
    return dataclasses.replace(PLAN, virt_type=virt_type, extras=guest_extras(_vmi(domain)))


EVERYTHING = _plan({"devices": DEVICES, "clock": CLOCK, "features": FEATURES})


def test_matches_golden_file() -> None:
    """Inputs, watchdog, panic device, video type, sound, no balloon, a clock with an
    offset and timers, and apic render exactly as reviewed (regenerate: KVPY_REGOLD=1)."""
    xml = build(EVERYTHING)
    if os.environ.get("KVPY_REGOLD"):
        GOLDEN.write_text(xml + "\n")
    assert xml + "\n" == GOLDEN.read_text()


def _windows_domain() -> dict[str, Any]:
    domain = yaml.safe_load(WINDOWS_EXAMPLE)["spec"]["domain"]
    assert isinstance(domain, dict)
    return domain


HYPERV_ALL: dict[str, Any] = {
    "relaxed": {},
    "vapic": {},
    "spinlocks": {"spinlocks": 8191},
    "vpindex": {},
    "runtime": {},
    "synic": {},
    "synictimer": {"direct": {}},
    "reset": {},
    "vendorid": {"vendorid": "KubeVirt"},
    "frequencies": {},
    "reenlightenment": {},
    "tlbflush": {},
    "ipi": {},
    "evmcs": {"enabled": False},
}

VARIANTS = [
    pytest.param(EVERYTHING, id="everything"),
    pytest.param(_plan(_windows_domain(), virt_type="kvm"), id="vmi-windows"),
    pytest.param(_plan({"features": {"hyperv": HYPERV_ALL}}, virt_type="kvm"), id="hyperv-all"),
    pytest.param(
        _plan(
            {"features": {"hypervPassthrough": {}, "kvm": {"hidden": True}, "pvspinlock": {}}},
            virt_type="kvm",
        ),
        id="passthrough-kvm-hidden",
    ),
    pytest.param(
        _plan({"clock": {"timezone": "Europe/Paris", "timer": {"kvm": {}}}}, virt_type="kvm"),
        id="timezone-kvmclock",
    ),
    pytest.param(
        _plan({"devices": {"autoattachSerialConsole": False, "autoattachInputDevice": True}}),
        id="no-serial-auto-input",
    ),
    pytest.param(_plan({"features": {"acpi": {"enabled": False}}}), id="no-acpi"),
    pytest.param(
        _plan({"devices": {"panicDevices": [{"model": "hyperv"}]}}, virt_type="kvm"),
        id="hyperv-panic",
    ),
]


@pytest.mark.parametrize("plan", VARIANTS)
def test_passes_virt_xml_validate(tmp_path: Path, plan: DomainPlan) -> None:
    """libvirt's own schema accepts every variant."""
    path = tmp_path / "domain.xml"
    path.write_text(build(plan))
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_hyperv_dependencies_enabled_with_them() -> None:
    """An enlightenment's unset dependency is enabled with it (synic -> vpindex; evmcs ->
    vapic), spinlocks default to 4096 retries, synictimer renders as stimer."""
    root = ET.fromstring(
        build(_plan({"features": {"hyperv": {"synictimer": {}, "spinlocks": {}}}}, virt_type="kvm"))
    )
    hyperv = root.find("features/hyperv")
    assert hyperv is not None
    assert [el.tag for el in hyperv] == ["spinlocks", "vpindex", "synic", "stimer"]
    assert hyperv.find("spinlocks").get("retries") == "4096"  # type: ignore[union-attr]


def test_serial_console_and_balloon_follow_autoattach() -> None:
    """autoattachSerialConsole false: no serial device; autoattachMemBalloon false: the
    balloon is explicitly none (libvirt would add one); default: both there."""
    off = ET.fromstring(
        build(_plan({"devices": {"autoattachSerialConsole": False, "autoattachMemBalloon": False}}))
    )
    assert off.find("devices/serial") is None
    assert off.find("devices/memballoon").get("model") == "none"  # type: ignore[union-attr]
    on = ET.fromstring(build(_plan({})))
    assert on.find("devices/serial/log") is not None
    assert on.find("devices/memballoon").get("model") == "virtio"  # type: ignore[union-attr]


KVM_ONLY = [
    pytest.param(
        {"features": {"hyperv": {"relaxed": {}}}}, "spec.domain.features.hyperv", id="hyperv"
    ),
    pytest.param(
        {"features": {"hypervPassthrough": {}}},
        "spec.domain.features.hypervPassthrough",
        id="passthrough",
    ),
    pytest.param(
        {"features": {"kvm": {"hidden": True}}}, "spec.domain.features.kvm", id="kvm-hidden"
    ),
    pytest.param(
        {"features": {"pvspinlock": {}}}, "spec.domain.features.pvspinlock", id="pvspinlock"
    ),
    pytest.param({"clock": {"timer": {"kvm": {}}}}, "spec.domain.clock.timer.kvm", id="kvmclock"),
    pytest.param(
        {"clock": {"timer": {"hyperv": {}}}}, "spec.domain.clock.timer.hyperv", id="hypervclock"
    ),
    pytest.param(
        {"devices": {"panicDevices": [{"model": "hyperv"}]}},
        "spec.domain.devices.panicDevices[0].model",
        id="hyperv-panic",
    ),
]


@pytest.mark.parametrize(("domain", "field"), KVM_ONLY)
def test_kvm_only_settings_fail_on_an_emulating_node(domain: dict[str, Any], field: str) -> None:
    """Under TCG each KVM-only setting is refused with a typed error naming the field and
    the node; under KVM it is fine."""
    vmi = _vmi(domain)
    with pytest.raises(HypervisorUnsupported) as info:
        require_runnable(vmi, virt_type="qemu", node="node01")
    assert field in info.value.message and "node node01" in info.value.message
    assert info.value.details["fields"][0]["path"] == field
    require_runnable(vmi, virt_type="kvm", node="node01")


def test_disabled_kvm_only_settings_run_anywhere() -> None:
    """Disabled KVM-only settings (and the emulated timers) need no KVM."""
    vmi = _vmi(
        {
            "features": {
                "pvspinlock": {"enabled": False},
                "kvm": {"hidden": False},
                "hyperv": {"relaxed": {"enabled": False}},
            },
            "clock": {"timer": {"kvm": {"present": False}, "hpet": {"present": False}}},
        }
    )
    require_runnable(vmi, virt_type="qemu", node="node01")


def test_vmi_windows_fails_on_tcg_naming_fields() -> None:
    """KubeVirt's vmi-windows example on an emulating node: the Hyper-V features and the
    Hyper-V clock are named."""
    with pytest.raises(HypervisorUnsupported) as info:
        require_runnable(_vmi(_windows_domain()), virt_type="qemu", node="n1")
    paths = [f["path"] for f in info.value.details["fields"]]
    assert paths == ["spec.domain.features.hyperv", "spec.domain.clock.timer.hyperv"]
