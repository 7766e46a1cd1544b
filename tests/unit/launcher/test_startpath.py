"""The launcher's start path: libvirtd starts before the heavy part of the launcher loads."""

from __future__ import annotations

import subprocess
import sys


def test_the_start_path_imports_nothing_heavy() -> None:
    """Importing launcher.main (all it needs to start libvirtd) loads neither the model,
    the domain XML builder, libvirt-python nor the wire client: those load while the
    daemon starts (launcher.serve)."""
    code = (
        "import sys\n"
        "import launcher.main\n"
        "heavy = [m for m in ('shared.model', 'launcher.manager', 'launcher.domxml', 'libvirt',"
        " 'launcher.serve', 'shared.wire.client', 'shared.wire.server') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "HEAVY []" in out, out


def test_the_launcher_loads_yaml_only_for_cloud_init_keys() -> None:
    """launcher.serve (everything a Sync needs) does not import PyYAML: only a VMI whose
    access credentials go into cloud-init user data loads it."""
    code = "import sys\nimport launcher.serve\nprint('YAML', 'yaml' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "YAML False" in out, out
