"""The soak's pure parts: a daemon is flat when its last window stays within the margin of
its first; the table shows each daemon's RSS and open files per sample; a daemon whose
pid changes is a restart."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "scripts" / "bench"))

from soak_sampler import DaemonSampler, Reading, Sample, table, verdicts


def _samples(rss: list[float], fds: list[int]) -> list[Sample]:
    return [
        Sample(minute=float(m), readings={"virt-handler@node01": Reading(pid=1, rss_mib=r, fds=f)})
        for m, (r, f) in enumerate(zip(rss, fds, strict=True))
    ]


def test_flat_within_the_margin_growing_beyond_it() -> None:
    """Means over the first and the last window: +2 MiB on 80 is flat (10% + 4 MiB); a
    steady climb to twice the memory, or ten more files each minute, is not."""
    kw = {"window": 3.0, "margin": 0.10, "rss_slack": 4.0, "fd_slack": 4.0}
    flat = verdicts(_samples([80, 81, 80, 82, 81, 82, 82], [30] * 7), **kw)
    assert [v.flat for v in flat] == [True] and flat[0].rss_first == 80.75
    climbing = verdicts(_samples([80 + 15 * m for m in range(7)], [30] * 7), **kw)
    assert [v.flat for v in climbing] == [False]
    leaking = verdicts(_samples([80] * 7, [30 + 10 * m for m in range(7)]), **kw)
    assert [v.flat for v in leaking] == [False]


def test_the_table_has_a_row_per_sample() -> None:
    """minute, churn cycles, then RSS/files per daemon (a dash where it was not seen)."""
    samples = _samples([80.0, 81.25], [30, 31])
    samples.append(Sample(minute=2.0, readings={}))
    rows = table(samples, {0.0: 0, 1.0: 4}).splitlines()
    assert rows[0].split() == ["min", "cycles", "virt-handler@node01"]
    assert rows[2].split() == ["1.0", "4", "81.2/31"] and rows[3].split() == ["2.0", "0", "-"]


def test_a_new_pid_under_a_name_is_a_restart(tmp_path: Path) -> None:
    """The sampler follows daemons by role and node; this process posing as one, then
    another pid under the same name, counts one restart."""
    sampler = DaemonSampler(cgroup_roots={}, nodes_dir=tmp_path)
    me = os.getpid()
    sampler._found = lambda: {"virt-handler@node01": me}  # type: ignore[method-assign]
    first = sampler.sample(0.0)
    assert first.readings["virt-handler@node01"].fds > 0 and not sampler.restarts
    sampler._last_pid["virt-handler@node01"] = me + 1_000_000
    sampler.sample(1.0)
    assert sampler.restarts == {"virt-handler@node01": 1}
