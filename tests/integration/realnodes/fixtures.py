"""Session fixtures for tests on real nodes, registered once for the whole suite
(tests/conftest.py's ``pytest_plugins``): a module that imported them would get its own
session instances, a second deploy onto the same cluster whose new serving certificate the
running virt-api never loads (its APIService then never becomes Available).

- ``real_cluster`` (session): kubelet + containerd + runc per node, each node in its own
  network and mount namespaces (localkube/realnode), running the images scripts/build-images
  built here; started from nothing for this session and torn down at its end; a build or
  start failure fails every test using it, with the reason;
- ``real_kubectl`` (session): kubectl with its admin kubeconfig;
- ``real_stack`` (session): kubevirt-py deployed onto it from manifests/overlays/local,
  the production overlay with this machine's images and TCG; at its end the daemons' logs
  must hold no work item failed with a traceback (logscan.py);
- ``fault_windows`` (session): when the tests marked ``faults`` ran, which that check excuses;
- ``peer_stack`` (session): a second real-node cluster (one node) peered with
  ``real_cluster`` (localkube/realnode/peering.py: pods of each reach the other's),
  kubevirt-py deployed on it with the first deployment's CA (the migration proxies and the
  synchronization endpoints trust each other), the gate DecentralizedLiveMigration on in
  both KubeVirt CRs; the same log check at its end. Only when a collected test asks for
  it: ``peer_start`` then starts it in a thread as soon as ``real_stack`` is up
  (peerstack.py), overlapping the tests before the first that uses it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.deploy import Kubectl, deploy
from localkube.errors import LocalKubeError
from localkube.realnode.namespaces import KUBELET_SYSCTLS
from localkube.testing import session_cluster
from shared.clusterconfig import DECENTRALIZED_MIGRATION_GATE
from tests.integration.realnodes.logscan import Window, daemon_failures
from tests.integration.realnodes.peerstack import PeerStack, PeerStart, gate_on

# The session fixtures, and PeerStack (what peer_stack yields: tests import it from here).
__all__ = [
    "PeerStack",
    "fault_windows",
    "peer_stack",
    "peer_start",
    "real_certs",
    "real_cluster",
    "real_kubectl",
    "real_stack",
]


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[Cluster]:
    """The session's real-node cluster; the host's global sysctls as they were before it
    started are kept in its state dir (host-before.json) for the tests that compare."""
    before = {"sysctls": {e: Path("/proc/sys", e).read_text().strip() for e in KUBELET_SYSCTLS}}
    failure = ""
    try:
        with session_cluster(NodeKind.KUBELET) as cluster:
            (cluster.paths.root / "host-before.json").write_text(json.dumps(before))
            yield cluster
    except LocalKubeError as e:
        failure = str(e)
    if failure:
        pytest.fail(f"real-node cluster unavailable: {failure}", pytrace=False)


@pytest.fixture(scope="session")
def real_kubectl(real_cluster: Cluster) -> Kubectl:
    return Kubectl(real_cluster.config.bin_dir / "kubectl", real_cluster.kubeconfig)


@pytest.fixture(scope="session")
def fault_windows() -> list[Window]:
    """When the tests marked `faults` ran (plus grace): the log check excuses those."""
    return []


@pytest.fixture(scope="session")
def real_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where real_stack's deployment keeps its certificates (``ca/``: the kubevirt-py CA)."""
    return tmp_path_factory.mktemp("certs")


@pytest.fixture(scope="session")
def peer_start(
    real_cluster: Cluster, real_certs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PeerStart]:
    """The peer stack's start (not started yet: real_stack or peer_stack starts it); at its
    end the peer cluster torn down, before real_cluster."""
    start = PeerStart(
        first=real_cluster, ca=real_certs / "ca", certs=tmp_path_factory.mktemp("peer-certs")
    )
    yield start
    start.close()


@pytest.fixture(scope="session")
def real_stack(
    request: pytest.FixtureRequest,
    real_cluster: Cluster,
    real_kubectl: Kubectl,
    real_certs: Path,
    fault_windows: list[Window],
    peer_start: PeerStart,
) -> Iterator[Kubectl]:
    """kubevirt-py deployed as an operator would, onto the real nodes; at the end, no work
    item may have failed with a traceback outside a test that injects faults. When a
    collected test asks for peer_stack, the peer stack starts now, in the background."""
    deploy(real_kubectl, certs=real_certs, real_nodes=True, timeout=300)
    if any("peer_stack" in getattr(item, "fixturenames", ()) for item in request.session.items):
        peer_start.start()
    yield real_kubectl
    _check_daemon_logs(real_kubectl, fault_windows)


@pytest.fixture(scope="session")
def peer_stack(
    real_stack: Kubectl, peer_start: PeerStart, fault_windows: list[Window]
) -> Iterator[PeerStack]:
    """A second real-node cluster peered with real_cluster, kubevirt-py deployed on it with
    real_stack's CA; DecentralizedLiveMigration on in both KubeVirt CRs (A's set here, in
    the main thread, between tests). Failing to start fails the tests using it with the
    reason; at its end the same log check as real_stack (the cluster is torn down by
    peer_start)."""
    waited, failure = time.monotonic(), ""
    try:
        peer = peer_start.result()
        gate_on(real_stack, DECENTRALIZED_MIGRATION_GATE)
    except LocalKubeError as e:
        failure = str(e)
    if failure:
        pytest.fail(f"peer cluster unavailable: {failure}", pytrace=False)
    print(f"PEER-STACK up in {peer.seconds}s, waited for {time.monotonic() - waited:.1f}s")
    yield peer
    _check_daemon_logs(peer.kubectl, fault_windows, where=" of the peer cluster")


def _check_daemon_logs(kubectl: Kubectl, fault_windows: list[Window], *, where: str = "") -> None:
    """No work item failed with a traceback outside a test that injects faults (VMs and
    VMIs then deleted, not waited for)."""
    found = daemon_failures(kubectl)
    kubectl("delete", "vm", "--all", "-A", "--wait=false", check=False)
    kubectl("delete", "vmi", "--all", "-A", "--wait=false", check=False)
    excused = [f for f in found if f.within(fault_windows)]
    for failure in excused:
        print(f"LOG-CHECK excused (during a test that injects faults): {failure}")
    if failures := [f for f in found if not f.within(fault_windows)]:
        listed = "\n".join(f"  {f}" for f in failures)
        pytest.fail(f"work items failed with a traceback in the daemons' logs{where}:\n{listed}")
