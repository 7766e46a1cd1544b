"""The test guest hears the ACPI power button from just after its boot marker: the power
button's modules load first (scripts/build-guest) and init starts acpid as soon as button is
in, before the other modules load. acpid opens only the input devices there are when it
starts, so evdev must come before button, or the guest would ignore ACPI altogether."""

from __future__ import annotations

import re
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def _modules() -> list[str]:
    text = (SCRIPTS / "build-guest").read_text()
    match = re.search(r"^MODULES=\((.*?)^\)", text, re.M | re.S)
    assert match, "no MODULES=( ... ) in scripts/build-guest"
    return match.group(1).split()


def _function(name: str) -> str:
    text = (SCRIPTS / "guest" / "init").read_text()
    match = re.search(rf"^{name}\(\) \{{\n(.*?)^\}}", text, re.M | re.S)
    assert match, f"no {name}() in scripts/guest/init"
    return match.group(1)


def test_evdev_and_button_load_first() -> None:
    """evdev, then button, are the first modules the guest loads (neither has a dependency
    that would be put in front of them)."""
    assert _modules()[:2] == ["evdev", "button"]


def test_init_starts_acpid_once_button_is_loaded_unless_acpi_is_ignored() -> None:
    """load_modules calls power_button right after button's insmod (or at once when button
    is built in), and power_button starts acpid unless kvpy.ignore_acpi=1 is on the kernel
    command line; nothing else in init starts acpid."""
    load = _function("load_modules")
    assert "grep -qx button /lib/modules/load-order || power_button" in load
    insmod = load.index('insmod "/lib/modules/$name.ko"')
    assert load.index('[ "$name" != button ] || power_button', insmod) > insmod
    button = _function("power_button")
    assert "grep -qw kvpy.ignore_acpi=1 /proc/cmdline" in button
    assert button.index("kvpy.ignore_acpi=1") < button.index("acpid -c /etc/acpi")
    init = (SCRIPTS / "guest" / "init").read_text()
    assert init.count("acpid -c") == 1
    assert init.index("echo KUBEVIRT-PY-GUEST-BOOTED") < init.index("\nload_modules\n")
