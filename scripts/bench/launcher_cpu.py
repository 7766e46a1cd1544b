"""The launcher's start-up CPU, in-process and without a cluster or libvirt (issue 39).

Each round is a fresh interpreter that measures CPU time (``time.process_time``, so a busy
host moves the figures little) at the launcher's marks: the interpreter's start, the start
path's imports (``launcher.main``, what spawning libvirtd needs), the rest of the launcher
(``launcher.serve``), then a Sync of the tiny guest's VMI through the real DomainManager
(parse, validate, plan, domain XML, config drive) against a fake libvirt, twice (the second
Sync is the status-only path), with bytecode cached as in the image. Prints the median of
each step over the rounds, ms of CPU.

    python scripts/bench/launcher_cpu.py [--rounds 7] [--profile out.prof] [--against DIR]

``--against`` measures another tree too (e.g. ``git archive main`` unpacked), its rounds
interleaved with this tree's.
``--profile`` runs one more round under cProfile and writes its stats there (imports and
the first Sync), printing the top functions by cumulative time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Bytecode kept with the project's other caches (scripts/lib/common.sh's KV_CACHE).
PYCACHE = str(
    Path(os.environ.get("KUBEVIRT_PY_CACHE", Path.home() / ".cache" / "kubevirt-py"))
    / "launcher-cpu-pycache"
)

CHILD = r"""
import time
marks = {"interpreter": time.process_time()}
import sys
sys.path.insert(0, REPO)
PROFILE = PROFILE_PATH
if PROFILE:
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
import launcher.main
marks["start_path_imported"] = time.process_time()
import launcher.serve
marks["launcher_imported"] = time.process_time()
import asyncio, tempfile, copy, uuid
from pathlib import Path
import yaml
from launcher.disks import DiskContext
from launcher.manager import DomainManager, Identity
from launcher.plan import HostPaths
from shared import podlayout
from shared.wire.domain import DomainState

class FakeVirt:
    def __init__(self):
        self.events = asyncio.Queue()
        self.current = None
    async def define(self, xml):
        self.current = DomainState.SHUTOFF
    async def state(self, name):
        return None if self.current is None else (self.current, 1)
    async def start(self, name, *, paused):
        self.current = DomainState.PAUSED if paused else DomainState.RUNNING
    async def domain_xml(self, name):
        return "<domain><devices/></domain>"

vmi = yaml.safe_load(Path(REPO, "examples", "vmi-tiny.yaml").read_text())
uid = str(uuid.uuid4())
vmi["metadata"]["uid"] = uid
with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    for rel in (podlayout.disk_file("containerdisk"), podlayout.kernel_file(),
                podlayout.initrd_file()):
        (root / "cd" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "cd" / rel).write_bytes(b"k" * 512)
    (root / "w").mkdir()
    manager = DomainManager(
        virt=FakeVirt(),
        identity=Identity(namespace="default", name="tiny", uid=uid),
        disks=DiskContext(work_dir=root / "w", container_disks=root / "cd",
                          vmi_disks=root / "vmi-disks"),
        host=HostPaths(serial_log=root / "serial.log", console_socket=root / "c.sock",
                       agent_socket=root / "a.sock", partition=None),
        virt_type="qemu",
        publish=lambda event: None,
    )
    marks["setup"] = time.process_time()
    status = asyncio.run(manager.sync(copy.deepcopy(vmi)))
    assert status.state == DomainState.RUNNING, status
    marks["first_sync"] = time.process_time()
    asyncio.run(manager.sync(copy.deepcopy(vmi)))
    marks["second_sync"] = time.process_time()
if PROFILE:
    prof.disable()
    prof.dump_stats(PROFILE)
print("MARKS " + json.dumps(marks))
"""

STEPS = (
    ("interpreter", "interpreter start (before any import)", None),
    ("start_path_imported", "launcher.main imported (start path)", "interpreter"),
    ("launcher_imported", "launcher.serve imported (the rest)", "start_path_imported"),
    ("first_sync", "first Sync (parse, validate, plan, XML)", "setup"),
    ("second_sync", "second Sync (status only)", "first_sync"),
)


def one_round(profile: str | None, *, repo: Path = REPO) -> dict[str, float]:
    code = "import json\n" + CHILD.replace("REPO", repr(str(repo)), 2).replace(
        "PROFILE_PATH", repr(profile)
    )
    # Bytecode cached as in the image (pip compiles it there), kept outside the tree.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
        env=env, cwd=repo,
    ).stdout  # fmt: skip
    line = next(x for x in out.splitlines() if x.startswith("MARKS "))
    marks: dict[str, float] = json.loads(line.removeprefix("MARKS "))
    return marks


def step_medians(rounds: list[dict[str, float]]) -> list[float]:
    """Each step's median CPU, ms, and last the total to the domain started."""
    medians = []
    for key, _, since in STEPS:
        medians.append(statistics.median(r[key] - (r[since] if since else 0.0) for r in rounds))
    total = [r["first_sync"] - (r["setup"] - r["launcher_imported"]) for r in rounds]
    return [m * 1e3 for m in [*medians, statistics.median(total)]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", help="write one profiled round's cProfile stats here")
    parser.add_argument("--against", type=Path, help="another tree (e.g. main's), interleaved")
    args = parser.parse_args()
    trees = [REPO, *([args.against.resolve()] if args.against else [])]
    for tree in trees:
        one_round(None, repo=tree)  # compiles and caches the bytecode
    rounds: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    for _ in range(args.rounds):
        for tree in trees:
            rounds[tree].append(one_round(None, repo=tree))
    print(f"launcher start-up CPU (process_time), median of {args.rounds} fresh interpreters, ms")
    print(f"  {'':45s} " + " ".join(f"{t.name[:12]:>12s}" for t in trees))
    columns = [step_medians(rounds[t]) for t in trees]
    labels = [label for _, label, _ in STEPS] + ["total to the domain started (less setup)"]
    for i, label in enumerate(labels):
        print(f"  {label:45s} " + " ".join(f"{c[i]:12.1f}" for c in columns))
    if args.profile:
        one_round(args.profile)
        import pstats  # noqa: PLC0415

        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
