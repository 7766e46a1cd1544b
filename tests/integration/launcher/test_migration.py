"""Live migration between two real launchers (two private libvirtds) with the real guest.

The guest ticks once a second on its serial console; across a migration the ticks keep
increasing, first in the source's serial log, then in the target's. Downtime and total
time are printed (measured by libvirt), never asserted.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from shared.wire.errors import CommandFailed
from shared.wire.launcher_api import Method
from shared.wire.migration import MigrationInfo, MigrationPhase, PrepareTargetResult
from tests.integration.launcher.harness import TICK, Launcher, call, tiny_vmi, wait_for

pytestmark = pytest.mark.integration
TICK_RE = re.compile(rf"{TICK} (\d+)")


def last_tick(text: str) -> int:
    ticks = [int(n) for n in TICK_RE.findall(text)]
    return ticks[-1] if ticks else -1


async def boot(launcher: Launcher) -> int:
    """Sync, wait for ticks; the last tick seen."""
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})
    return int(
        await wait_for(
            lambda: last_tick(launcher.serial()) >= 1 and last_tick(launcher.serial()),
            timeout=120,
            what="ticks on the source console",
            last=launcher.serial,
        )
    )


async def migration_of(launcher: Launcher) -> MigrationInfo | None:
    status = await call(launcher, Method.GET_DOMAIN)
    return MigrationInfo.from_status(status["migration"])


async def wait_final(launcher: Launcher) -> MigrationInfo:
    async def final() -> MigrationInfo | None:
        info = await migration_of(launcher)
        return info if info is not None and info.phase.is_final() else None

    result: MigrationInfo = await wait_for(final, timeout=180, what="migration end", last=None)
    return result


async def prepare(target: Launcher) -> PrepareTargetResult:
    raw = await call(target, Method.PREPARE_MIGRATION_TARGET, {"vmi": target.vmi})
    return PrepareTargetResult.from_wire(raw)


async def test_live_migration_keeps_the_guest_ticking(
    launchers: Callable[..., Launcher],
) -> None:
    """migrate returns at once; the domain moves; the target reports Running/Migrated,
    the source Shutoff/Migrated; ticks continue on the target's console; the target's
    domain runs in the target's cgroup partition with the target's disks."""
    vmi = tiny_vmi(name="mig")
    source = launchers(vmi)
    target = launchers(vmi)
    before = await boot(source)
    prepared = await prepare(target)
    assert len(prepared.libvirt_uri.split("socket=")[1]) < 108
    began = time.monotonic()
    accepted = MigrationInfo.from_wire(
        await call(source, Method.MIGRATE, {"address": prepared.address})
    )
    assert accepted.phase in (MigrationPhase.SCHEDULED, MigrationPhase.RUNNING)
    info = await wait_final(source)
    wall = time.monotonic() - began
    assert info.phase is MigrationPhase.SUCCEEDED, info.failure_reason
    print(f"\n[migration] wall {wall:.3f}s libvirt elapsed {info.elapsed_ms} ms "
          f"downtime {info.downtime_ms} ms")  # fmt: skip
    target_status = await call(target, Method.GET_DOMAIN)
    assert (target_status["state"], target_status["reason"]) == ("Running", "Migrated")
    assert MigrationInfo.from_wire(target_status["migration"]).phase is MigrationPhase.SUCCEEDED
    assert (await call(source, Method.GET_DOMAIN))["state"] == "Shutoff"
    after = await wait_for(
        lambda: last_tick(target.serial()) > before and last_tick(target.serial()),
        timeout=30,
        what="ticks on the target console",
        last=target.serial,
    )
    assert after > last_tick(source.serial()) - 1 >= before - 1
    xml = _dumpxml(target)
    assert str(target.private) in xml and str(source.private) not in xml


async def test_cancel_leaves_the_guest_on_the_source(launchers: Callable[..., Launcher]) -> None:
    """cancel_migration while the (bandwidth-limited) memory copy runs: the job fails as
    aborted, the source domain keeps running and ticking, the target has no domain."""
    vmi = tiny_vmi(name="migc")
    source = launchers(vmi)
    target = launchers(vmi)
    before = await boot(source)
    prepared = await prepare(target)
    await call(source, Method.MIGRATE, {"address": prepared.address, "bandwidthMiB": 4})

    async def copying() -> bool:
        info = await migration_of(source)
        return info is not None and (info.data_processed or 0) > 0

    await wait_for(copying, timeout=60, what="memory being copied", last=None)
    print("\n[cancel] before cancel:", await migration_of(source))
    await call(source, Method.CANCEL_MIGRATION)
    info = await wait_final(source)
    assert (info.phase, info.aborted) == (MigrationPhase.FAILED, True), info
    assert (await call(source, Method.GET_DOMAIN))["state"] == "Running"
    await wait_for(
        lambda: last_tick(source.serial()) > before + 1,
        timeout=30,
        what="ticks on the source after the abort",
        last=source.serial,
    )
    with pytest.raises(CommandFailed):
        await call(target, Method.GET_DOMAIN)
    with pytest.raises(CommandFailed):
        await call(source, Method.CANCEL_MIGRATION)


async def test_migrate_to_nowhere_fails_and_guest_stays(
    launchers: Callable[..., Launcher],
) -> None:
    """A target address with nothing behind it: Failed with a reason, guest still Running."""
    source = launchers(tiny_vmi(name="mign"))
    await boot(source)
    await call(source, Method.MIGRATE, {"address": "/var/run/kubevirt-py/mig/nowhere"})
    info = await wait_final(source)
    assert info.phase is MigrationPhase.FAILED and info.failure_reason
    assert (await call(source, Method.GET_DOMAIN))["state"] == "Running"


def _dumpxml(launcher: Launcher) -> str:
    out: Any = subprocess.run(
        ["virsh", "-c", launcher.libvirt_uri, "dumpxml", f"default_{launcher.vmi['metadata']['name']}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return str(out.stdout)
