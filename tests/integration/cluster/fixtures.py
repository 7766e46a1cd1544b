"""Fixtures for tests against the real local cluster (control plane built from Go modules).

- ``kube_cluster`` (session): a localkube ``Cluster`` started from nothing for this
  session and torn down (no process, no mount, no state left) at its end, with the
  kubevirt.io CRDs installed and kubevirt-py's admission webhooks on (admission.py): every
  VM, VMI, VMIM and instancetype any test creates is defaulted and validated as a deployed
  kubevirt-py would. If the control plane cannot be built or started, or the webhooks
  cannot be put in front of it, every test using it errors with the reason.
- ``kube_api`` (test): a kubernetes-asyncio ``ApiClient`` with the admin kubeconfig.
- ``kube_namespace`` (test): a fresh namespace name, deleted after the test.
- ``wait_for`` / ``pod_logs`` live in ``localkube.testing``.

A pytest plugin module: this directory's conftest imports it. For suites elsewhere,
register it once in tests/conftest.py (``pytest_plugins = [...]``) and drop that import,
so the session cluster stays one per session.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from kubernetes_asyncio import client, config

from localkube.cluster import Cluster
from localkube.errors import LocalKubeError
from localkube.testing import dns_label, session_cluster
from tests.integration.cluster.admission import AdmissionUnavailable, SessionAdmission


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's cluster with the webhooks on; a build or start failure fails the
    tests with the reason."""
    failure = ""
    try:
        with session_cluster() as cluster:
            admission = SessionAdmission(
                cluster, pki_dir=tmp_path_factory.mktemp("admission-pki"), host=cluster.host_address
            )
            try:
                admission.start()
                yield cluster
            finally:
                admission.stop()
    except (LocalKubeError, AdmissionUnavailable) as e:
        failure = str(e)
    if failure:
        pytest.fail(f"local cluster unavailable: {failure}", pytrace=False)


@pytest.fixture
async def kube_api(kube_cluster: Cluster) -> AsyncIterator[client.ApiClient]:
    """An admin (system:masters) ApiClient for the session cluster."""
    # The embedded certificate and key go to the cluster's state dir (purged with it), not
    # /tmp, where an interrupted session would leave them.
    api = await config.new_client_from_config(
        config_file=str(kube_cluster.kubeconfig),
        temp_file_path=str(kube_cluster.kubeconfig.parent),
    )
    async with api:
        yield api


@pytest.fixture
async def kube_namespace(
    kube_api: client.ApiClient, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """A namespace for this test only (deletion is not awaited)."""
    name = f"{dns_label(request.node.name, max_len=40)}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    await core.delete_namespace(name)
