"""Test support for suites that run against the local cluster.

- ``session_cluster()``: build (or reuse) the control plane and start a private cluster
  from nothing (its own state dir, nodes dir and ports), for one pytest session;
- ``peer_session_cluster()``: a second, one-node real-node cluster peered with the first
  (its pods reach the first's and back: decentralized migration across clusters);
- ``wait_for()``: poll until a predicate holds; on timeout the error shows what was last
  seen, so a failing integration test says why;
- ``pod_logs()``: a pod's container output, read from the node's pod directory.
"""

from __future__ import annotations

import asyncio
import os
import pprint
import re
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from localkube.cluster import Cluster
from localkube.config import DEFAULT_NODES, REPO, ClusterConfig, NodeKind, parse_image_list
from localkube.errors import ComponentFailed
from localkube.procs import pid_alive
from localkube.realnode.noderes import NodeResources
from localkube.stopping import stop_signals

T = TypeVar("T")
TEST_STATE_ROOT = Path("/var/lib/kubevirt-py")
TEST_STATE_PREFIX = "test-"
# Real-node test sessions: the static CPU manager and 256 MiB of 2 MiB hugepages, unless
# KUBEVIRT_PY_CPU_MANAGER=none / KUBEVIRT_PY_HUGEPAGES_2MI=0 say otherwise.
TEST_HUGEPAGES_2MI = 128
# A session's second real-node cluster (peer_session_cluster): its name and its one node.
PEER_NAME = "b"
PEER_NODES = ("peer01",)


def session_node_resources() -> NodeResources:
    """What real-node test clusters' kubelets offer (docs/node-resources.md)."""
    env = os.environ
    return NodeResources(
        cpu_manager_static=env.get("KUBEVIRT_PY_CPU_MANAGER", "static") == "static",
        hugepages_2mi=int(env.get("KUBEVIRT_PY_HUGEPAGES_2MI", str(TEST_HUGEPAGES_2MI))),
    )


def _build(repo: Path, script_name: str, what: str) -> str:
    """Run scripts/<script_name>; its stdout, or ComponentFailed with its output's tail."""
    script = repo / "scripts" / script_name
    proc = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-40:])
        raise ComponentFailed(what, f"{script} exited {proc.returncode}", tail)
    return proc.stdout


def build_control_plane(repo: Path = REPO) -> Path:
    """Run scripts/build-control-plane; its bin dir, or ComponentFailed with its output."""
    out = _build(repo, "build-control-plane", "control-plane build")
    return Path(out.strip().splitlines()[-1])


def build_containerd(repo: Path = REPO) -> Path:
    """Run scripts/build-containerd (real nodes' containerd 2); its bin dir."""
    out = _build(repo, "build-containerd", "containerd build")
    return Path(out.strip().splitlines()[-1])


def build_csi_sidecars(repo: Path = REPO) -> Path:
    """Run scripts/build-csi-sidecars; its output dir, or ComponentFailed with its output."""
    out = _build(repo, "build-csi-sidecars", "CSI sidecar build")
    return Path(out.strip().splitlines()[-1])


def build_multus(repo: Path = REPO) -> Path:
    """Run scripts/build-multus (real nodes' multus thin plugin); its output dir."""
    out = _build(repo, "build-multus", "multus build")
    return Path(out.strip().splitlines()[-1])


def build_registry(repo: Path = REPO) -> Path:
    """Run scripts/build-registry (the real nodes' private registry); its output dir."""
    out = _build(repo, "build-registry", "registry build")
    return Path(out.strip().splitlines()[-1])


def build_images(repo: Path = REPO) -> tuple[tuple[str, Path], ...]:
    """Run scripts/build-images; the (ref, OCI archive) pairs, or ComponentFailed."""
    return parse_image_list(_build(repo, "build-images", "image build"))


def private_cluster_config(
    bin_dir: Path,
    *,
    session: int | None = None,
    kind: NodeKind = NodeKind.PROCESS,
    images: tuple[tuple[str, Path], ...] = (),
    containerd_bin: Path = Path(),
    csi_dir: Path | None = None,
    multus_dir: Path | None = None,
    registry_dir: Path | None = None,
    name: str = "",
) -> ClusterConfig:
    """A cluster private to one test session (pid-keyed dirs; short node paths). A session
    may run one cluster of each node kind, and real-node clusters with a ``name`` beside
    them (their own dirs, one node: ``PEER_NODES``)."""
    sid = session if session is not None else os.getpid()
    real = kind == NodeKind.KUBELET
    suffix = f"-{name}" if name else ""
    return ClusterConfig(
        state_dir=TEST_STATE_ROOT / f"{TEST_STATE_PREFIX}{sid}{'-kubelet' if real else ''}{suffix}",
        nodes_dir=Path(f"/var/lib/kvt{sid}{'k' if real else ''}{name}"),
        nodes=PEER_NODES if name else DEFAULT_NODES,
        bin_dir=bin_dir,
        node_kind=kind,
        images=images,
        containerd_bin=containerd_bin,
        csi_dir=csi_dir,
        multus_dir=multus_dir,
        node_resources=session_node_resources() if real else NodeResources(),
        registry_dir=registry_dir,
    )


def reap_stale_test_clusters(bin_dir: Path) -> list[int]:
    """Tear down clusters of test sessions whose pytest process is gone."""
    stale = []
    for entry in TEST_STATE_ROOT.glob(f"{TEST_STATE_PREFIX}*"):
        sid, _, suffix = entry.name.removeprefix(TEST_STATE_PREFIX).partition("-")
        if sid.isdigit() and not pid_alive(int(sid)):
            word, _, name = suffix.partition("-")  # "", "kubelet" or "kubelet-<name>"
            kind = NodeKind.KUBELET if word == "kubelet" else NodeKind.PROCESS
            config = private_cluster_config(bin_dir, session=int(sid), kind=kind, name=name)
            asyncio.run(Cluster(config).down(purge=True))
            stale.append(int(sid))
    return stale


def _running_healthy(cluster: Cluster) -> bool:
    if not cluster.config.state_dir.exists():
        return False
    statuses = asyncio.run(cluster.status())
    return bool(statuses) and all(s.healthy for s in statuses)


@contextmanager
def session_cluster(kind: NodeKind = NodeKind.PROCESS) -> Iterator[Cluster]:
    """Build, start from an empty state dir, yield, then tear down and purge.

    Real nodes need the images too (scripts/build-images). If this process's private
    cluster is already up (another fixture started it), it is yielded as is and left to
    that fixture to tear down.

    SIGTERM, SIGINT or SIGHUP (localkube.stopping) interrupts the session and this tears
    the cluster down; another signal meanwhile SIGKILLs its processes first.
    """
    signals = stop_signals()
    signals.install()
    bin_dir = build_control_plane()
    reap_stale_test_clusters(bin_dir)
    real = kind == NodeKind.KUBELET
    images = build_images() if real else ()
    containerd = build_containerd() if real else Path()
    csi_dir = build_csi_sidecars() if real else None
    multus_dir = build_multus() if real else None
    registry_dir = build_registry() if real else None
    config = private_cluster_config(
        bin_dir, kind=kind, images=images, containerd_bin=containerd, csi_dir=csi_dir,
        multus_dir=multus_dir, registry_dir=registry_dir,
    )  # fmt: skip
    cluster = Cluster(config)
    if _running_healthy(cluster):
        yield cluster
        return
    shutil.rmtree(cluster.config.state_dir, ignore_errors=True)
    shutil.rmtree(cluster.config.nodes_dir, ignore_errors=True)
    with signals.on_force(cluster.kill_now):
        try:
            asyncio.run(cluster.up())
            yield cluster
        finally:
            with signals.tearing_down():
                asyncio.run(cluster.down(purge=True))


@contextmanager
def peer_session_cluster(first: Cluster, *, name: str = PEER_NAME) -> Iterator[Cluster]:
    """A second real-node cluster beside this session's ``first``, peered with it
    (localkube/realnode/peering.py), then torn down and purged (the peering with it).

    As cheap as it can be: one node (``PEER_NODES``), ``first``'s builds (control plane,
    containerd, images: imported into its node's containerd, no registry), its local PVs
    but no CSI stack, no multus (so no migration network), no static CPU manager nor
    hugepages. SIGTERM, SIGINT or SIGHUP tear it down as ``session_cluster`` does."""
    signals = stop_signals()
    signals.install()
    base = first.config
    config = private_cluster_config(
        base.bin_dir, kind=NodeKind.KUBELET, images=base.images,
        containerd_bin=base.containerd_bin, name=name,
    ).replace(node_resources=NodeResources())  # fmt: skip
    cluster = Cluster(config)
    shutil.rmtree(config.state_dir, ignore_errors=True)
    shutil.rmtree(config.nodes_dir, ignore_errors=True)
    with signals.on_force(cluster.kill_now):
        try:
            asyncio.run(cluster.up())
            asyncio.run(first.peer(cluster))
            yield cluster
        finally:
            with signals.tearing_down():
                asyncio.run(cluster.down(purge=True))


def _render(value: Any, limit: int = 4000) -> str:
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, BaseException):
        text = f"{type(value).__name__}: {value}"
    else:
        text = pprint.pformat(value, width=100, compact=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


async def wait_for(
    probe: Callable[[], Awaitable[T]],
    ok: Callable[[T], bool],
    *,
    what: str,
    timeout: float = 60.0,
    interval: float = 0.5,
    show: Callable[[T], Any] | None = None,
) -> T:
    """Call ``probe`` until ``ok(result)``; AssertionError with the last result on timeout.

    Exceptions from ``probe`` (a 404 before an object exists, say) count as "not yet"
    and are shown as the last thing seen.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = "nothing (probe never returned)"
    while True:
        try:
            async with asyncio.timeout(max(1.0, deadline - loop.time())):
                value = await probe()
            if ok(value):
                return value
            last = show(value) if show else value
        except Exception as e:  # shown to the reader on timeout
            last = e
        if loop.time() >= deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; last seen:\n{_render(last)}"
            )
        await asyncio.sleep(interval)


def pod_logs(config: ClusterConfig, pod: Any) -> str:
    """All container output of a pod (kubernetes-asyncio V1Pod or dict) on its node."""
    data = pod.to_dict() if hasattr(pod, "to_dict") else pod
    node = (data.get("spec") or {}).get("node_name") or (data.get("spec") or {}).get("nodeName")
    uid = data["metadata"]["uid"]
    if not node:
        return "(pod not scheduled)"
    root = config.nodes_dir / node / "pods" / uid / "logs"
    parts = []
    for f in sorted(root.glob("*/*.log"), key=lambda p: (p.parent.name, int(p.stem))):
        parts.append(f"--- {f.parent.name} #{f.stem} ---\n{f.read_text(errors='replace')}")
    return "\n".join(parts) or f"(no logs under {root})"


def dns_label(text: str, *, max_len: int = 40) -> str:
    """A valid DNS-1123 label made from a test name."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:max_len].rstrip("-") or "t"
