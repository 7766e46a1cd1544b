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
- ``peer_stack`` (session, started when a test first asks for it): a second real-node
  cluster (one node) peered with ``real_cluster`` (localkube/realnode/peering.py: pods of
  each reach the other's), kubevirt-py deployed on it with the first deployment's CA (the
  migration proxies and the synchronization endpoints trust each other), the gate
  DecentralizedLiveMigration on in both KubeVirt CRs; the same log check at its end.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.deploy import Kubectl, deploy
from localkube.errors import LocalKubeError
from localkube.realnode.namespaces import KUBELET_SYSCTLS
from localkube.testing import peer_session_cluster, session_cluster
from shared.clusterconfig import DECENTRALIZED_MIGRATION_GATE
from tests.integration.realnodes.logscan import Window, daemon_failures


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
def real_stack(
    real_cluster: Cluster, real_kubectl: Kubectl, real_certs: Path, fault_windows: list[Window]
) -> Iterator[Kubectl]:
    """kubevirt-py deployed as an operator would, onto the real nodes; at the end, no work
    item may have failed with a traceback outside a test that injects faults."""
    deploy(real_kubectl, certs=real_certs, real_nodes=True, timeout=300)
    yield real_kubectl
    _check_daemon_logs(real_kubectl, fault_windows)


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerStack:
    """The session's second cluster, peered with the first, kubevirt-py running on it."""

    kubectl: Kubectl
    cluster: Cluster
    node: str  # its one node
    certs: Path  # its deployment's certificates (``ca/`` is real_stack's)
    seconds: float  # how long it took to come up (cluster, peering, deploy)


@pytest.fixture(scope="session")
def peer_stack(
    real_stack: Kubectl,
    real_cluster: Cluster,
    real_certs: Path,
    tmp_path_factory: pytest.TempPathFactory,
    fault_windows: list[Window],
) -> Iterator[PeerStack]:
    """A second real-node cluster peered with real_cluster, kubevirt-py deployed on it with
    real_stack's CA; DecentralizedLiveMigration on in both KubeVirt CRs. Failing to start
    fails the tests using it with the reason; at its end the same log check as real_stack."""
    started, failure = time.monotonic(), ""
    try:
        with peer_session_cluster(real_cluster) as cluster:
            kubectl = Kubectl(cluster.config.bin_dir / "kubectl", cluster.kubeconfig)
            certs = tmp_path_factory.mktemp("peer-certs")
            shutil.copytree(real_certs / "ca", certs / "ca")
            deploy(kubectl, certs=certs, real_nodes=True, timeout=300)
            for k in (kubectl, real_stack):
                _gate_on(k, DECENTRALIZED_MIGRATION_GATE)
            seconds = round(time.monotonic() - started, 1)
            print(f"PEER-STACK up in {seconds}s")
            node = cluster.config.nodes[0]
            yield PeerStack(
                kubectl=kubectl, cluster=cluster, node=node, certs=certs, seconds=seconds
            )
            _check_daemon_logs(kubectl, fault_windows, where=" of the peer cluster")
    except LocalKubeError as e:
        failure = str(e)
    if failure:
        pytest.fail(f"peer cluster unavailable: {failure}", pytrace=False)


def _gate_on(k: Kubectl, gate: str) -> None:
    """``gate`` added to the KubeVirt CR's feature gates unless there."""
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    dev = kv["spec"].get("configuration", {}).get("developerConfiguration", {})
    gates = dev.get("featureGates", [])
    if gate not in gates:
        body = {
            "spec": {"configuration": {"developerConfiguration": {"featureGates": [*gates, gate]}}}
        }
        k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(body))


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
