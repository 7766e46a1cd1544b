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
from shared.model.instancetype import INSTANCETYPE_KINDS as KINDS
from tests.integration.cluster.admission import Kubectl, Ran, dry_run
from tests.integration.conformance.checks import (
    Doc,
    domain_xml,
    example_docs,
    honoured_problems,
    refusal_problems,
    schema_problems,
    vmi_of,
)

pytestmark = pytest.mark.integration
DOCS = example_docs()
INSTANCETYPE_KINDS = frozenset(cls.KIND for cls in KINDS)


@pytest.fixture(scope="module")
def answers(kube_cluster: Cluster) -> Iterator[dict[str, Ran]]:
    """Every example document's dry-run answer, by document id: the session cluster has
    the CRDs and the webhooks (tests/integration/cluster/admission.py). Instancetypes and
    preferences are created for real (a VM's admission looks them up), in file order, so
    the VMs after them find them; the cluster-wide ones are deleted at the end."""
    kubectl = Kubectl(kube_cluster)
    namespace = f"kvpy-conformance-{uuid.uuid4().hex[:8]}"
    kubectl.ok("create", "namespace", namespace)
    created: list[str] = []
    try:
        out = {}
        for doc in DOCS:
            obj = _unplaced(doc.obj)
            if obj.get("kind") not in INSTANCETYPE_KINDS:
                out[doc.id] = dry_run(kubectl, obj, namespace)
                continue
            out[doc.id] = kubectl("create", "-o", "json", "-n", namespace, "-f", "-",
                                  stdin=json.dumps(obj))  # fmt: skip
            if out[doc.id].code == 0 and obj["kind"].startswith("VirtualMachineCluster"):
                created.append(f"{obj['kind'].lower()}/{obj['metadata']['name']}")
        yield out
    finally:
        for name in created:
            kubectl("delete", name, "--wait=false")
        kubectl("delete", "namespace", namespace, "--wait=false")


def _unplaced(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("namespace", None)
    return out


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
    same_file = {  # the file's admitted documents (a refused one has no object)
        d.key: _admitted(answers[d.id]) for d in DOCS if d.path == doc.path and not d.refused_paths
    }
    raw_vmi = vmi_of(admitted, same_file)
    if raw_vmi is None:
        return
    vmi, xml = await domain_xml(raw_vmi, tmp_path)
    assert schema_problems(xml, tmp_path) == []
    assert honoured_problems(vmi, xml) == []
