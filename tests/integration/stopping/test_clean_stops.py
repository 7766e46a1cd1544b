"""Tooling stopped by a signal tears down what it started (localkube.stopping): `scripts/cluster
up`, a pytest session and `scripts/bench-handler` under `timeout`, each run as a user would
in a subprocess and signalled once its cluster runs, leave no process, mount, network
namespace, link, cgroup, state or node directory of that cluster behind; `scripts/bench-launcher`
and `scripts/bench-migration` (no cluster: launchers, libvirtds and QEMUs of their own) leave
no process and no scratch directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localkube.config import REPO, ClusterConfig, NodeKind
from localkube.testing import build_control_plane, private_cluster_config
from tests.integration.stopping.footprint import Footprint

pytestmark = [pytest.mark.integration, pytest.mark.cluster]
START_TIMEOUT = 600.0  # builds may run first
EXIT_TIMEOUT = 300.0
BENCH_TIMEOUT = 30  # seconds `timeout` gives the benchmark
AFTER_TIMEOUT = 30.0  # the "30 s later"


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return build_control_plane()


def _poll(what: str, done: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    """Until `done()`; fails naming `what` if the child exits first or it takes too long."""
    deadline = time.monotonic() + START_TIMEOUT
    while not done():
        if proc.poll() is not None:
            pytest.fail(f"{proc.args!r} exited {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{proc.args!r}: no {what} after {START_TIMEOUT}s")
        time.sleep(0.2)


def _any_started(fp: Footprint) -> bool:
    fp.seen()
    run = fp.config.paths.run
    return run.exists() and any(run.glob("*.pid"))


def _stop(proc: subprocess.Popen[bytes], *sigs: signal.Signals) -> int:
    for i, sig in enumerate(sigs):
        if i:
            time.sleep(1.0)
        proc.send_signal(sig)
    try:
        return proc.wait(EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{proc.args!r} still running {EXIT_TIMEOUT}s after {sigs}")


@pytest.fixture
def private_cluster_env(bin_dir: Path) -> Iterator[tuple[dict[str, str], ClusterConfig]]:
    """Environment for `scripts/cluster` with a state dir and node dir of its own (one
    process-mode node); whatever a failing test leaves is torn down afterwards."""
    tag = uuid.uuid4().hex[:6]
    config = ClusterConfig(
        state_dir=Path(f"/var/lib/kubevirt-py/stoptest-{tag}"),
        nodes_dir=Path(f"/var/lib/kvs{tag}"),
        bin_dir=bin_dir,
        nodes=("node01",),
        node_kind=NodeKind.PROCESS,
    )
    env = {
        **os.environ,
        "KUBEVIRT_PY_CLUSTER_DIR": str(config.state_dir),
        "KUBEVIRT_PY_NODES_DIR": str(config.nodes_dir),
        "KUBEVIRT_PY_NODE_KIND": "process",
        "KUBEVIRT_PY_NODES": "1",
    }
    yield env, config
    subprocess.run(
        [str(REPO / "scripts" / "cluster"), "down", "--purge"], env=env, check=False, timeout=300
    )


@pytest.mark.parametrize(
    "sigs",
    [(signal.SIGTERM,), (signal.SIGHUP,), (signal.SIGINT, signal.SIGTERM)],
    ids=["sigterm", "sighup", "sigint-then-sigterm-forces"],
)
def test_cluster_up_stopped_by_a_signal_leaves_nothing(
    private_cluster_env: tuple[dict[str, str], ClusterConfig], sigs: tuple[signal.Signals, ...]
) -> None:
    """`scripts/cluster up` signalled once its first component runs tears the new cluster
    down (exit 128+signal); a second signal forces the teardown (SIGKILL first), which
    still ends with nothing left."""
    env, config = private_cluster_env
    fp = Footprint(config)
    proc = subprocess.Popen([str(REPO / "scripts" / "cluster"), "up"], env=env)
    _poll("a component of its cluster running", lambda: _any_started(fp), proc)
    code = _stop(proc, *sigs)
    assert code == 128 + sigs[0], f"exit {code}"
    assert fp.remaining() == []


def test_pytest_session_stopped_by_sigterm_leaves_nothing(bin_dir: Path, tmp_path: Path) -> None:
    """A pytest session whose session cluster is up, stopped by SIGTERM (as CI or a
    closed terminal stops it), tears the cluster down through its fixtures and exits."""
    probe = tmp_path / "probe"
    env = {**os.environ, "KVPY_STOP_PROBE": str(probe)}
    module = Path(__file__).with_name("probe_session.py")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)]
    proc = subprocess.Popen(args, cwd=REPO, env=env)
    fp = Footprint(private_cluster_config(bin_dir, session=proc.pid))
    _poll("its session cluster up", lambda: probe.exists() and _any_started(fp), proc)
    assert Path(probe.read_text()) == fp.config.state_dir
    _stop(proc, signal.SIGTERM)
    assert fp.remaining() == []


def _child_of(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def test_bench_handler_killed_by_timeout_leaves_nothing(bin_dir: Path) -> None:
    """`timeout 30 scripts/bench-handler` (real nodes): the benchmark's private cluster,
    started within those 30 s, is gone 30 s after `timeout` ended it, and so are its
    certificates and keys (its logs dir keeps only logs)."""
    script = REPO / "scripts" / "bench-handler"
    logs = Path(tempfile.mkdtemp(prefix="bench-handler-"))
    try:
        _bench_killed(bin_dir, [str(script), "--vmis", "2", "--logs", str(logs)])
        keys = sorted(str(p) for p in logs.rglob("*") if p.suffix in (".key", ".crt"))
        assert keys == [], f"the benchmark left its keys behind: {keys}"
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def _bench_killed(bin_dir: Path, argv: list[str]) -> None:
    """Run `argv` under `timeout 30`: it had started its cluster when killed, and its
    footprint is gone within AFTER_TIMEOUT."""
    proc = subprocess.Popen(["timeout", str(BENCH_TIMEOUT), *argv])
    _poll("the benchmark's process", lambda: _child_of(proc.pid) is not None, proc)
    bench = _child_of(proc.pid)
    assert bench is not None
    config = private_cluster_config(bin_dir, session=bench, kind=NodeKind.KUBELET)
    fp = Footprint(config)
    while proc.poll() is None:
        fp.seen()
        time.sleep(0.2)
    assert proc.returncode == 124, f"the benchmark ended by itself ({proc.returncode})"
    assert fp.started, "the benchmark had not started its cluster within the 30 s"
    deadline = time.monotonic() + AFTER_TIMEOUT
    while fp.remaining() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert fp.remaining() == []


def _naming(root: Path) -> list[int]:
    """Processes whose command line names a path under `root`."""
    mark = os.fsencode(str(root)) + b"/"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize(
    ("script", "running", "sig"),
    [
        ("bench-launcher", "libvirtd", signal.SIGTERM),
        ("bench-migration", "qemu-system", signal.SIGINT),
    ],
    ids=["bench-launcher-sigterm", "bench-migration-sigint"],
)
def test_process_benches_stopped_under_timeout_leave_nothing(
    script: str, running: str, sig: signal.Signals
) -> None:
    """`timeout 600 scripts/bench-launcher` (and bench-migration), stopped through
    `timeout` (which passes the signal on, as when it expires) once the benchmark's
    launchers run libvirtd (a guest's QEMU for the migration one): the benchmark exits
    128+signal, and within 30 s no process names its scratch dir (launchers, libvirtds,
    QEMUs, floor daemons) and the dir is gone."""
    scratch = Path(f"/tmp/kvst-{uuid.uuid4().hex[:6]}")
    env = {**os.environ, "KVPY_BENCH_SCRATCH": str(scratch)}
    proc = subprocess.Popen(["timeout", "600", str(REPO / "scripts" / script)], env=env)
    try:

        def started() -> bool:
            for pid in _naming(scratch):
                with contextlib.suppress(OSError):
                    if running.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        return True
            return False

        _poll(f"{running} under {scratch}", started, proc)
        code = _stop(proc, sig)
        assert code == 128 + sig, f"exit {code}"
        deadline = time.monotonic() + AFTER_TIMEOUT
        while _naming(scratch) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _naming(scratch) == []
        assert not scratch.exists(), sorted(str(p) for p in scratch.rglob("*"))[:20]
    finally:
        for pid in _naming(scratch):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)
