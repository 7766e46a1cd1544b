"""The real-node bench's process sampler classifies a process once per (pid, start, comm),
but not while it cannot tell: a process caught mid-exec (its new comm, no argv yet) is
asked again, so a guest's QEMU caught that way is still found and its boot marker seen."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "scripts" / "bench"))

from proc_sampler import Role, Sampler

POD = "7e9350ef-f207-4716-bae4-72b9c3ad0381"
CGROUP = f"2:cpuacct:/kvpy0-node01/kubepods/burstable/pod{POD}/c0ffee\n"
QEMU_ARGV = b"/usr/bin/qemu-system-x86_64\0-name\0guest=ns_vm,debug-threads=on\0"


def _sampler(tmp_path: Path) -> Sampler:
    return Sampler(
        ours=("/nodes/",), cgroup_roots={"/kvpy0-node01": "node01"},
        nodes_dir=tmp_path / "nodes", proc=tmp_path / "proc",
    )  # fmt: skip


def _process(sampler: Sampler, pid: int, *, argv: bytes, cgroup: str = CGROUP) -> None:
    d = sampler.proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "cmdline").write_bytes(argv)
    (d / "cgroup").write_text(cgroup)


def test_a_process_caught_mid_exec_is_classified_once_its_argv_is_there(tmp_path: Path) -> None:
    """Empty argv under QEMU's comm (the kernel has not loaded QEMU yet) is not cached as
    "not ours": the next snapshot finds the guest's QEMU in its pod."""
    sampler = _sampler(tmp_path)
    _process(sampler, 4242, argv=b"")
    key = (4242, 1234)
    assert sampler._classify(key, "qemu-system-x86", ppid=4000) == (None, "")
    _process(sampler, 4242, argv=QEMU_ARGV)
    assert sampler._classify(key, "qemu-system-x86", ppid=4000) == (Role.QEMU, POD)


def test_kernel_threads_and_settled_processes_are_classified_once(tmp_path: Path) -> None:
    """A kernel thread (kthreadd's child, no argv) and a classified process are not read
    again under the same (pid, start, comm)."""
    sampler = _sampler(tmp_path)
    _process(sampler, 77, argv=b"", cgroup="2:cpuacct:/\n")
    assert sampler._classify((77, 5), "kworker/0:1", ppid=2) == (None, "")
    _process(sampler, 4243, argv=QEMU_ARGV)
    assert sampler._classify((4243, 9), "qemu-system-x86", ppid=4000) == (Role.QEMU, POD)
    _process(sampler, 77, argv=QEMU_ARGV)
    _process(sampler, 4243, argv=b"")
    assert sampler._classify((77, 5), "kworker/0:1", ppid=2) == (None, "")
    assert sampler._classify((4243, 9), "qemu-system-x86", ppid=4000) == (Role.QEMU, POD)
