"""The launcher's start path: libvirtd starts before the heavy part of the launcher loads."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cmdsocket import import_off_loop
from tests.unit.importcheck import loaded_by


def test_the_start_path_imports_nothing_heavy() -> None:
    """Importing launcher.main (all it needs to start libvirtd) loads neither the model,
    the domain XML builder, libvirt-python nor the wire client: those load while the
    daemon starts (launcher.serve)."""
    heavy = (
        "shared.model", "launcher.manager", "launcher.domxml", "libvirt", "launcher.serve",
        "shared.wire.client", "shared.wire.server",
    )  # fmt: skip
    loaded, out = loaded_by("import launcher.main", heavy)
    assert loaded == [], out


def test_the_launcher_loads_yaml_only_for_cloud_init_keys() -> None:
    """launcher.serve (everything a Sync needs) does not import PyYAML: only a VMI whose
    access credentials go into cloud-init user data loads it."""
    code = "import sys\nimport launcher.serve\nprint('YAML', 'yaml' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "YAML False" in out, out


async def test_the_heavy_import_leaves_the_event_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """launcher.serve is imported in a thread (import_off_loop): the loop keeps turning
    (and the command socket answering the handler's handshake) while a slow import runs."""
    (tmp_path / "slow_module_for_test.py").write_text("import time\ntime.sleep(0.3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    await import_off_loop("slow_module_for_test")
    ticker.cancel()
    assert "slow_module_for_test" in sys.modules
    assert ticks >= 10, ticks


def test_launcher_serve_imports_in_a_thread() -> None:
    """The launcher's own heavy part (the model, libvirt-python, the wire) loads from a
    worker thread as launcher.app loads it."""
    code = (
        "import asyncio, sys\n"
        "from launcher.cmdsocket import import_off_loop\n"
        "asyncio.run(import_off_loop('launcher.serve'))\n"
        "print('LOADED', 'launcher.serve' in sys.modules, 'libvirt' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "LOADED True True" in out, out
