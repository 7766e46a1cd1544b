"""KubeVirt's progressTimeout in the source job: a migration whose figures stop moving for
that long is aborted and fails saying so; one that keeps moving, however slowly, is not."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterator

import pytest

from launcher.errors import LibvirtFailure
from launcher.migration import DowntimePolicy, SourceMigrator
from launcher.migration_stall import StallWatch
from launcher.virttypes import JobStats, MigrationRequest
from shared.wire.errors import InvalidArgument
from shared.wire.migration import MigrateArgs, MigrationInfo, MigrationPhase
from tests.unit.launcher.test_source_migrator import TARGET, FakeVirt


class ScriptedVirt(FakeVirt):
    """A migration whose job figures come from `figures`, one pair (processed, remaining)
    per poll; it succeeds once they run out, and libvirt's abort makes it fail."""

    def __init__(self, figures: Iterator[tuple[int, int]]) -> None:
        super().__init__()
        self._figures = figures
        self.aborts = 0

    async def migrate(self, name: str, request: MigrationRequest) -> None:
        await super().migrate(name, request)
        if self.aborts:
            raise LibvirtFailure("operation aborted: migration out: canceled by client")

    async def abort_job(self, name: str) -> None:
        self.aborts += 1
        self.finish.set()

    async def job_stats(self, name: str, *, completed: bool = False) -> JobStats:
        if completed:
            return JobStats(elapsed_ms=10)
        try:
            processed, remaining = next(self._figures)
        except StopIteration:
            self.finish.set()
            processed, remaining = 0, 0
        return JobStats(data_processed=processed, data_remaining=remaining)

    async def set_max_downtime(self, name: str, milliseconds: int) -> None:
        self.downtimes.append(milliseconds)


async def _run(virt: ScriptedVirt, *, progress_timeout: int | None) -> MigrationInfo:
    final: list[MigrationInfo] = []
    done = asyncio.Event()

    def publish(info: MigrationInfo) -> None:
        if info.phase.is_final():
            final.append(info)
            done.set()

    seconds = itertools.count()  # a clock one second further at each reading (one a poll)
    job = SourceMigrator(
        virt=virt,
        domain="default_x",
        publish=publish,
        downtime=DowntimePolicy(relax_after_polls=1000),
        progress_interval=0.001,
        clock=lambda: float(next(seconds)),
    )
    args = MigrateArgs(
        address="/mig/x", domain_xml=TARGET, progress_timeout_seconds=progress_timeout
    )
    async with asyncio.timeout(5), asyncio.TaskGroup() as tg:
        runner = tg.create_task(job.run())
        job.start(args)
        await done.wait()
        runner.cancel()
    return final[-1]


async def test_a_migration_that_stops_moving_is_aborted_after_the_progress_timeout() -> None:
    """The figures move for three polls, then stay put: once `progressTimeout` seconds
    passed without progress the job is aborted (libvirt's abortJob, once) and the migration
    fails with KubeVirt's reason, not libvirt's "canceled by client"; not as a user's
    abort (the VMIM fails, the guest stays)."""
    moving = [(100, 900), (200, 800), (300, 700)]
    virt = ScriptedVirt(itertools.chain(moving, itertools.repeat((300, 700))))
    info = await _run(virt, progress_timeout=3)
    assert virt.aborts == 1
    assert info.phase is MigrationPhase.FAILED and not info.aborted and info.timed_out
    assert info.failure_reason == "Live migration stuck for 3 seconds and has been aborted"
    assert (info.data_processed, info.data_remaining) == (300, 700)


@pytest.mark.parametrize(
    "figures",
    [
        pytest.param([(100 * i, 900 - i) for i in range(1, 30)], id="remaining-down-slowly"),
        # A guest dirtying memory as fast as it is sent: remaining flat, data still flowing.
        pytest.param([(100 * i, 900) for i in range(1, 30)], id="processed-up-remaining-flat"),
        # Progress every other poll (a throttled stream's bursts) within the timeout.
        pytest.param([(100 * (i // 2), 900) for i in range(1, 30)], id="bursts"),
    ],
)
async def test_a_migration_that_keeps_moving_is_not_aborted(
    figures: list[tuple[int, int]],
) -> None:
    """Progress (remaining down or processed up) at least every `progressTimeout` seconds,
    for far longer than that in all: the migration runs to its end and succeeds."""
    virt = ScriptedVirt(iter(figures))
    info = await _run(virt, progress_timeout=2)
    assert virt.aborts == 0
    assert info.phase is MigrationPhase.SUCCEEDED


async def test_without_a_progress_timeout_a_stalled_migration_is_left_to_the_timeout() -> None:
    """A migrate call without progressTimeoutSeconds (an older handler) never aborts on a
    stall: the figures stay put for 50 polls and the job is still running its course."""
    virt = ScriptedVirt(itertools.repeat((300, 700), 50))
    info = await _run(virt, progress_timeout=None)
    assert virt.aborts == 0 and info.phase is MigrationPhase.SUCCEEDED


class TimingOutVirt(ScriptedVirt):
    """A migrate call that never progresses and ends as the launcher's libvirt call
    timeout does (KubeVirt's completionTimeoutPerGiB budget spent)."""

    async def migrate(self, name: str, request: MigrationRequest) -> None:
        raise LibvirtFailure("libvirt call migrate timed out")


async def test_a_migration_past_its_completion_timeout_is_aborted_in_kubevirts_words() -> None:
    """The job's completion timeout ran out: libvirt's job is aborted and the migration
    fails timed out (abortStatus Succeeded at the handler) with KubeVirt's reason, not the
    call's "timed out"."""
    virt = TimingOutVirt(itertools.repeat((300, 700)))
    info = await _run(virt, progress_timeout=None)
    assert virt.aborts == 1
    assert info.phase is MigrationPhase.FAILED and not info.aborted and info.timed_out
    assert info.failure_reason is not None
    assert re.fullmatch(
        r"Live migration is not completed after \d+ seconds and has been aborted",
        info.failure_reason,
    ), info.failure_reason


def test_the_watch_counts_from_the_start_and_from_each_progress() -> None:
    """No figures at all (a job that never got going) stall from the start; the first
    bytes sent count as progress; figures that go backwards or stay put do not."""
    watch = StallWatch(timeout=5, started=10.0)
    assert watch.stalled_for(now=14.9) is None
    assert watch.stalled_for(now=15.5) == 5
    watch.saw(JobStats(data_processed=1, data_remaining=100), now=16.0)
    assert watch.stalled_for(now=20.0) is None
    watch.saw(JobStats(data_processed=1, data_remaining=200), now=21.0)
    assert watch.stalled_for(now=22.0) == 6
    assert StallWatch(timeout=None, started=0).stalled_for(now=1e9) is None


def test_progress_timeout_travels_on_the_wire_and_bad_values_are_named() -> None:
    """progressTimeoutSeconds round-trips; absent it is None (no stall check); zero, a
    negative or a non-integer value is refused naming the field."""
    args = MigrateArgs(address="x", progress_timeout_seconds=150)
    assert args.to_wire()["progressTimeoutSeconds"] == 150
    assert MigrateArgs.from_wire(args.to_wire()) == args
    assert MigrateArgs.from_wire({"address": "x"}).progress_timeout_seconds is None
    assert "progressTimeoutSeconds" not in MigrateArgs(address="x").to_wire()
    for bad in (0, -1, "150", True):
        with pytest.raises(InvalidArgument, match="progressTimeoutSeconds"):
            MigrateArgs.from_wire({"address": "x", "progressTimeoutSeconds": bad})
