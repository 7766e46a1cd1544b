"""The launcher's backups (launcher.backup): the guest frozen only around backupBegin (and
thawed when it fails), incremental from a checkpoint libvirt knows, full with the reason
when it does not or no disk can carry a bitmap, the job followed to its end and the base
checkpoint deleted once the new one is complete; and the wire contract round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.backup import Backups
from launcher.errors import AgentNotConnected, DiskFailure, LibvirtFailure
from launcher.virttypes import BackupJob
from shared.wire.backup import (
    BackupBeginArgs,
    BackupCmd,
    BackupReply,
    BackupRequest,
    JobState,
)
from shared.wire.errors import InvalidArgument

QCOW2 = """<disk type='file' device='disk'><driver type='qcow2'/><source file='/s.qcow2'/>
  <target dev='vda'/><alias name='ua-scratch'/></disk>"""
RAW = """<disk type='file' device='disk'><driver type='raw'/><source file='/d.img'/>
  <target dev='vdb'/><alias name='ua-data'/></disk>"""


class FakeVirt:
    def __init__(self, *disks: str, agent: bool = True, fail_begin: bool = False) -> None:
        self.xml = f"<domain><devices>{''.join(disks)}</devices></domain>"
        self.agent = agent
        self.fail_begin = fail_begin
        self.calls: list[str] = []
        self.known: list[str] = []
        self.job = BackupJob(running=True)
        self.begun: tuple[str, str] | None = None

    async def domain_xml(self, name: str) -> str:
        return self.xml

    async def backup_begin(self, name: str, backup_xml: str, checkpoint_xml: str) -> None:
        self.calls.append("begin")
        if self.fail_begin:
            raise LibvirtFailure("no space")
        self.begun = (backup_xml, checkpoint_xml)

    async def checkpoints(self, name: str) -> list[str]:
        return list(self.known)

    async def delete_checkpoint(self, name: str, checkpoint: str) -> None:
        self.calls.append(f"delete {checkpoint}")

    async def backup_job(self, name: str) -> BackupJob:
        return self.job

    async def fs_freeze(self, name: str) -> int:
        if not self.agent:
            raise AgentNotConnected("no agent")
        self.calls.append("freeze")
        return 1

    async def fs_thaw(self, name: str) -> int:
        self.calls.append("thaw")
        return 1


def backups(virt: FakeVirt) -> Backups:
    ticks = iter(range(100))
    return Backups(virt=virt, domain=lambda: "ns_vm", clock=lambda: float(next(ticks)))


def args(tmp_path: Path, **more: object) -> BackupBeginArgs:
    target = str(tmp_path / "b1")
    return BackupBeginArgs(target_dir=target, checkpoint="t-2", **more)  # type: ignore[arg-type]


async def test_full_backup_freezes_only_around_begin(tmp_path: Path) -> None:
    """Freeze, backupBegin with the checkpoint, thaw; Running with every disk, none
    incremental, and the seconds the guest was frozen."""
    virt = FakeVirt(QCOW2, RAW)
    reply = await backups(virt).begin(args(tmp_path))
    assert virt.calls == ["freeze", "begin", "thaw"]
    assert reply.state is JobState.RUNNING and reply.checkpoint == "t-2"
    assert [(v.volume, v.file, v.incremental) for v in reply.volumes] == [
        ("scratch", "scratch.qcow2", False),
        ("data", "data.qcow2", False),
    ]
    assert reply.frozen_seconds == 1.0
    assert virt.begun is not None and "<incremental>" not in virt.begun[0]
    assert 'bitmap="t-2"' in virt.begun[1]


async def test_incremental_from_a_known_checkpoint(tmp_path: Path) -> None:
    """A base checkpoint libvirt knows: the qcow2 disk copies only what changed since it,
    the raw one in full; no fallback reason."""
    virt = FakeVirt(QCOW2, RAW)
    virt.known = ["t-1"]
    reply = await backups(virt).begin(args(tmp_path, incremental="t-1"))
    assert [v.incremental for v in reply.volumes] == [True, False]
    assert reply.full_reason == ""
    assert virt.begun is not None and "<incremental>t-1</incremental>" in virt.begun[0]


@pytest.mark.parametrize(
    ("disks", "known", "reason"),
    [
        pytest.param((QCOW2,), [], "unknown to the VM's libvirt", id="restarted"),
        pytest.param((RAW,), ["t-1"], "raw disks only", id="raw-only"),
    ],
)
async def test_incremental_falls_back_to_full_saying_why(
    disks: tuple[str, ...], known: list[str], reason: str, tmp_path: Path
) -> None:
    """A base checkpoint this libvirt does not know (a restart or migration since), or no
    disk able to carry a bitmap: a full backup, and the reason."""
    virt = FakeVirt(*disks)
    virt.known = known
    reply = await backups(virt).begin(args(tmp_path, incremental="t-1"))
    assert reason in reply.full_reason
    assert not any(v.incremental for v in reply.volumes)
    assert virt.begun is not None and "<incremental>" not in virt.begun[0]


async def test_raw_disks_only_make_no_checkpoint(tmp_path: Path) -> None:
    """Nothing can carry a bitmap: no checkpoint is created (and none reported)."""
    virt = FakeVirt(RAW)
    reply = await backups(virt).begin(args(tmp_path))
    assert reply.checkpoint is None and virt.begun is not None and virt.begun[1] == ""


async def test_no_agent_no_freeze_and_skip_quiesce(tmp_path: Path) -> None:
    """Without an agent, or with skipQuiesce, backupBegin runs unfrozen."""
    virt = FakeVirt(QCOW2, agent=False)
    assert (await backups(virt).begin(args(tmp_path))).frozen_seconds == 0.0
    skipped = FakeVirt(QCOW2)
    await backups(skipped).begin(args(tmp_path, skip_quiesce=True))
    assert virt.calls == ["begin"] and skipped.calls == ["begin"]


async def test_a_failed_begin_still_thaws(tmp_path: Path) -> None:
    """backupBegin failing leaves the guest thawed and the error raised."""
    virt = FakeVirt(QCOW2, fail_begin=True)
    with pytest.raises(LibvirtFailure):
        await backups(virt).begin(args(tmp_path))
    assert virt.calls == ["freeze", "begin", "thaw"]


async def test_refusals_before_anything_is_frozen(tmp_path: Path) -> None:
    """No writable disk, or a target that is not mounted: refused, guest untouched."""
    with pytest.raises(DiskFailure, match="no writable disk"):
        await backups(FakeVirt()).begin(args(tmp_path))
    virt = FakeVirt(QCOW2)
    with pytest.raises(DiskFailure, match="not mounted"):
        await backups(virt).begin(args(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists()
    assert virt.calls == []


async def test_status_follows_the_job_and_deletes_the_base_once(tmp_path: Path) -> None:
    """Running, then Completed (the base checkpoint deleted, once); a failed job answers
    Failed with libvirt's message; no backup yet is an error."""
    virt = FakeVirt(QCOW2)
    virt.known = ["t-1"]
    b = backups(virt)
    with pytest.raises(LibvirtFailure):
        await b.status()
    await b.begin(args(tmp_path, incremental="t-1"))
    assert (await b.status()).state is JobState.RUNNING
    virt.job = BackupJob(completed=True, data_total=4096)
    done = await b.status()
    assert done.state is JobState.COMPLETED and done.bytes_total == 4096
    await b.status()
    assert virt.calls.count("delete t-1") == 1
    virt.job = BackupJob(completed=False, error="disk full")
    failed = await b.status()
    assert failed.state is JobState.FAILED and failed.message == "disk full"


def test_wire_contract_round_trips_and_refuses_bad_arguments() -> None:
    """Request, launcher args and reply survive the wire; bad names and keys are refused."""
    req = BackupRequest(backup_name="b1", checkpoint="t-2", incremental="t-1", target_pod="u")
    assert BackupRequest.from_wire(req.to_wire()) == req
    status = BackupRequest.from_wire({"cmd": "Status", "backupName": "b1"})
    assert status.cmd is BackupCmd.STATUS
    begin = BackupBeginArgs(target_dir="/t", checkpoint="c", incremental="b", skip_quiesce=True)
    assert BackupBeginArgs.from_wire(begin.to_wire()) == begin
    reply = BackupReply(state=JobState.COMPLETED, checkpoint="c", bytes_total=3, full_reason="x")
    assert BackupReply.from_wire(reply.to_wire()) == reply
    for bad in (
        {"backupName": "../x", "checkpoint": "c", "targetPod": "u"},
        {"backupName": "b", "targetPod": "u"},
        {"backupName": "b", "checkpoint": "c", "targetPod": "u", "typo": 1},
        {"cmd": "Abort", "backupName": "b"},
    ):
        with pytest.raises(InvalidArgument):
            BackupRequest.from_wire(bad)
    with pytest.raises(InvalidArgument):
        BackupBeginArgs.from_wire({"targetDir": "relative", "checkpoint": "c"})


async def test_the_same_backup_asked_twice_is_started_once(tmp_path: Path) -> None:
    """A repeated begin for the same target (the controller missed the first answer)
    answers the job's state and starts nothing."""
    virt = FakeVirt(QCOW2)
    b = backups(virt)
    first = await b.begin(args(tmp_path))
    again = await b.begin(args(tmp_path))
    assert virt.calls == ["freeze", "begin", "thaw"]
    assert again.state is JobState.RUNNING and again.checkpoint == first.checkpoint
