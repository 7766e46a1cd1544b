"""The launcher picks KVM only when the probe saw a guest boot with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.config import Config
from launcher.serve import virt_type_of

BASE = [
    "--name",
    "a",
    "--namespace",
    "n",
    "--uid",
    "u",
    "--sockets-dir",
    "/s",
    "--private-dir",
    "/p",
]


@pytest.mark.parametrize(
    ("probe", "flag", "expected"),
    [
        pytest.param("guest=x host=y\nkvm\n", "auto", "kvm", id="probe-kvm"),
        pytest.param("guest=x host=y\ntcg\n", "auto", "qemu", id="probe-tcg"),
        pytest.param(None, "auto", "qemu", id="no-probe"),
        pytest.param("guest=x\ntcg\n", "kvm", "kvm", id="forced-kvm"),
        pytest.param("guest=x\nkvm\n", "qemu", "qemu", id="forced-qemu"),
    ],
)
def test_virt_type(tmp_path: Path, probe: str | None, flag: str, expected: str) -> None:
    """auto follows the probe's last line; an explicit --virt-type wins."""
    args = [*BASE, "--virt-type", flag]
    if probe is not None:
        (tmp_path / "probe").write_text(probe)
        args += ["--kvm-probe-file", str(tmp_path / "probe")]
    assert virt_type_of(Config.from_args(args)) == expected
