"""Fixtures for launcher integration tests: the real guest, real libvirtd, real QEMU.

Nothing here skips: when the guest cannot be built or libvirt/QEMU are missing, the
tests fail and say why.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import (
    REPO,
    Launcher,
    cache_dir,
    call,
    qemu_pids_under,
    tiny_vmi,
    wait_for,
)

SHARED_BLOCK_SIZE = {"logical": 512, "physical": 4096, "discardGranularity": 65536}
# `launchers` stops each launcher by SIGTERM afterwards; a guest still booting is deaf to ACPI,
# so its launcher would idle through the whole grace before destroying it. The tests that check
# the SIGTERM path (test_lifecycle) pass their own grace.
TEARDOWN_GRACE = 1
REQUIRED_TOOLS = ("libvirtd", "qemu-system-x86_64", "tini", "genisoimage", "qemu-img", "unshare")


@pytest.fixture(scope="session")
def guest() -> Path:
    """Build (or reuse) the test guest; fail loudly when that is impossible."""
    missing = [
        t for t in REQUIRED_TOOLS if shutil.which(t) is None and not Path("/usr/sbin", t).exists()
    ]
    if missing:
        pytest.fail(f"missing {missing}: run ./scripts/test, which installs them")
    result = subprocess.run(
        [str(REPO / "scripts" / "build-guest")], capture_output=True, text=True, timeout=1200
    )
    if result.returncode != 0:
        pytest.fail(f"scripts/build-guest failed:\n{result.stderr[-3000:]}")
    probe = subprocess.run(
        [str(REPO / "scripts" / "probe-kvm")], capture_output=True, text=True, timeout=120
    )
    if probe.returncode != 0:
        pytest.fail(f"scripts/probe-kvm failed:\n{probe.stderr[-2000:]}")
    verdict = probe.stdout.strip()
    print(f"\n[launcher tests] guests run with {verdict.upper()} (scripts/probe-kvm)")
    return Path(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else cache_dir()


@pytest.fixture
def launchers(guest: Path) -> Iterator[Callable[..., Launcher]]:
    """Start launchers on demand (grace TEARDOWN_GRACE unless given); every one is stopped
    and checked for leftovers afterwards."""
    started: list[Launcher] = []

    def make(vmi: dict[str, Any] | None = None, **kwargs: Any) -> Launcher:
        root = Path(tempfile.mkdtemp(prefix="kvl", dir="/tmp"))
        kwargs.setdefault("grace", TEARDOWN_GRACE)
        launcher = Launcher(root=root, vmi=vmi or tiny_vmi(), **kwargs)
        started.append(launcher)
        launcher.start()
        return launcher

    yield make
    failures = []
    for launcher in started:  # every launcher is stopped, even after one check failed
        try:
            _stop_and_check(launcher)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, failures


def _stop_and_check(launcher: Launcher) -> None:
    try:
        launcher.terminate(timeout=60)
    finally:
        launcher.kill()
    leftovers = qemu_pids_under(launcher.root)
    shutil.rmtree(launcher.root, ignore_errors=True)
    assert not leftovers, f"QEMU left behind: {leftovers}"


@pytest.fixture(scope="module")
def booted(guest: Path) -> Iterator[Launcher]:
    """One launcher with the guest booted and its agent connected, shared by a module."""
    root = Path(tempfile.mkdtemp(prefix="kvl", dir="/tmp"))
    vmi = tiny_vmi(name="shared")
    # The root disk's blockSize with discardGranularity (test_guest.py reads it back).
    vmi["spec"]["domain"]["devices"]["disks"][0]["blockSize"] = {"custom": SHARED_BLOCK_SIZE}
    launcher = Launcher(root=root, vmi=vmi)
    launcher.start()
    try:
        asyncio.run(_boot(launcher))
        yield launcher
    finally:
        _stop_and_check(launcher)


async def _boot(launcher: Launcher) -> None:
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})

    async def agent() -> bool:
        status = await call(launcher, Method.GET_DOMAIN)
        return bool(status["agentConnected"])

    await wait_for(agent, timeout=90, what="guest agent", last=launcher.serial)


@pytest.fixture(scope="module")
def idle(guest: Path) -> Iterator[Launcher]:
    """A ready launcher with no domain yet, shared by a module of bad-input tests."""
    root = Path(tempfile.mkdtemp(prefix="kvl", dir="/tmp"))
    launcher = Launcher(root=root, vmi=tiny_vmi(name="idle"))
    launcher.start()
    try:
        yield launcher
    finally:
        _stop_and_check(launcher)
