"""Fixtures for tests on real nodes: kubelet + containerd + runc per node, each node in its
own network and mount namespaces (localkube/realnode), running the images scripts/build-images
built here.

- ``real_cluster`` (session): such a cluster, started from nothing for this session and torn
  down at its end; a build or start failure fails every test using it, with the reason;
- ``real_kubectl`` (session): kubectl with its admin kubeconfig;
- ``real_stack`` (session): kubevirt-py deployed onto it from manifests/overlays/local,
  the production overlay with this machine's images and TCG; at its end the daemons' logs
  must hold no work item failed with a traceback (logscan.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.deploy import Kubectl, deploy
from localkube.errors import LocalKubeError
from localkube.realnode.namespaces import KUBELET_SYSCTLS
from localkube.testing import session_cluster
from tests.integration.realnodes.logscan import FAULT_GRACE, Window, daemon_failures


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


@pytest.fixture(autouse=True)
def _record_fault_window(
    request: pytest.FixtureRequest, fault_windows: list[Window]
) -> Iterator[None]:
    if request.node.get_closest_marker("faults") is None:
        yield
        return
    start = time.time()
    yield
    fault_windows.append((start, time.time() + FAULT_GRACE))


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


@pytest.fixture
def real_namespace(real_kubectl: Kubectl) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    real_kubectl("create", "namespace", name)
    yield name
    # VMs first, and their VMIs gone, before the namespace: a VM whose VMI vanishes while its
    # namespace terminates makes the controller's re-create meet "namespace is being
    # terminated" (403), which the story test's RBAC check would count as a refusal.
    real_kubectl("delete", "vm", "--all", "-n", name, "--wait=true", "--timeout=120s", check=False)
    real_kubectl("delete", "vmi", "--all", "-n", name, "--wait=true", "--timeout=120s", check=False)
    real_kubectl("delete", "namespace", name, "--wait=false", check=False)


def pods(kubectl: Kubectl, ns: str, selector: str = "") -> list[dict[str, object]]:
    args = ["get", "pods", "-n", ns, "-o", "json", *(["-l", selector] if selector else [])]
    items: list[dict[str, object]] = json.loads(kubectl(*args))["items"]
    return items
