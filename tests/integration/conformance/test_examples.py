"""Conformance: every manifest under examples/ (the project's own and the KubeVirt-style
ones of examples/conformance) is honoured exactly or refused at admission naming the
field, through a real kube-apiserver calling kubevirt-py's webhooks (server-side dry
run: the apiserver's own schema, the mutating and the validating webhook), then, for what
is admitted, through the launcher's planner and XML builder, virt-xml-validate and the
launcher pod template (tests/integration/conformance/checks.py says what is checked)."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from tests.integration.conformance.checks import (
    REPO,
    Doc,
    domain_xml,
    example_docs,
    honoured_problems,
    refusal_problems,
    schema_problems,
    vmi_of,
)
from tests.integration.conformance.webhooks import (
    LABEL,
    Kubectl,
    Ran,
    WebhookServer,
    configurations,
    dry_run,
    register,
    unregister,
    wait_until_called,
)
from tests.integration.subresources.stack import host_ip
from tests.unit.subresources.certs import gen_certs

pytestmark = pytest.mark.integration
DOCS = example_docs()
CRDS = sorted((REPO / "manifests" / "base").glob("crd-*.yaml"))
PROBE = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "probe"},
    "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": "x"}]}}},
}


def _labelled(obj: dict[str, Any], run: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("labels", {})[LABEL] = run
    out["metadata"].pop("namespace", None)
    return out


@pytest.fixture(scope="module")
def answers(
    kube_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Ran]]:
    """Every example document's dry-run answer, by document id."""
    kubectl = Kubectl(kube_cluster)
    run = uuid.uuid4().hex[:8]
    namespace = f"kvpy-conformance-{run}"
    ip = host_ip()
    pki, bundle = gen_certs(tmp_path_factory.mktemp("pki"), "--api-san", f"IP:{ip}")
    for crd in CRDS:
        kubectl.ok("apply", "-f", str(crd))
    files = [arg for crd in CRDS for arg in ("-f", str(crd))]
    kubectl.ok("wait", "--for=condition=Established", "--timeout=60s", *files)
    kubectl.ok("create", "namespace", namespace)
    server = WebhookServer(cluster=kube_cluster, serving=pki.api, host=ip)
    server.start(timeout=60.0)
    configs = configurations(run=run, url=f"https://{ip}:{server.port}", ca_bundle=bundle)
    try:
        register(kubectl, configs)
        wait_until_called(kubectl, _labelled(PROBE, run), namespace)
        yield {doc.id: dry_run(kubectl, _labelled(doc.obj, run), namespace) for doc in DOCS}
    finally:
        unregister(kubectl, configs)
        kubectl("delete", "namespace", namespace, "--wait=false")
        server.stop(timeout=30.0)


def _admitted(answer: Ran) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(answer.stdout)
    return obj


@pytest.mark.parametrize("doc", DOCS, ids=[d.id for d in DOCS])
async def test_example_is_honoured_or_refused_naming_the_field(
    doc: Doc, answers: dict[str, Ran], tmp_path: Path
) -> None:
    """Refused by kube-apiserver's call to our webhook, naming each listed field; or
    admitted (with KubeVirt's defaults) and then carried exactly into the domain XML,
    which libvirt's schema accepts, and into the launcher pod."""
    answer = answers[doc.id]
    if doc.refused_paths:
        assert answer.code != 0, f"{doc.id} was admitted"
        assert refusal_problems(doc, answer.stderr) == []
        return
    assert answer.code == 0, answer.stderr
    admitted = _admitted(answer)
    same_file = {d.key: _admitted(answers[d.id]) for d in DOCS if d.path == doc.path}
    raw_vmi = vmi_of(admitted, same_file)
    if raw_vmi is None:
        return
    vmi, xml = await domain_xml(raw_vmi, tmp_path)
    assert schema_problems(xml, tmp_path) == []
    assert honoured_problems(vmi, xml) == []
