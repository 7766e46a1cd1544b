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
- ``fault_windows`` (session): when the tests marked ``faults`` ran, which that check excuses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.deploy import Kubectl, deploy
from localkube.errors import LocalKubeError
from localkube.realnode.namespaces import KUBELET_SYSCTLS
from localkube.testing import session_cluster
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
def real_stack(
    real_cluster: Cluster,
    real_kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
    fault_windows: list[Window],
) -> Iterator[Kubectl]:
    """kubevirt-py deployed as an operator would, onto the real nodes; at the end, no work
    item may have failed with a traceback outside a test that injects faults."""
    deploy(real_kubectl, certs=tmp_path_factory.mktemp("certs"), real_nodes=True, timeout=300)
    yield real_kubectl
    found = daemon_failures(real_kubectl)
    real_kubectl("delete", "vm", "--all", "-A", "--wait=false", check=False)
    real_kubectl("delete", "vmi", "--all", "-A", "--wait=false", check=False)
    excused = [f for f in found if f.within(fault_windows)]
    for failure in excused:
        print(f"LOG-CHECK excused (during a test that injects faults): {failure}")
    if failures := [f for f in found if not f.within(fault_windows)]:
        listed = "\n".join(f"  {f}" for f in failures)
        pytest.fail(f"work items failed with a traceback in the daemons' logs:\n{listed}")
