"""Node resources on real nodes: each handler labels its Node with the CPU models, features
and host model its libvirt offers (KubeVirt's node-labeller keys); a VMI asking for a model
no node has stays Pending with the scheduler's reason while one asking for a labelled model
(with required and disabled features) runs; memoryOvercommit set on the KubeVirt CR changes
a new launcher pod's memory request, no daemon restarted; obsoleteCPUModels set there
relabels both nodes at once (docs/node-resources.md)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from localkube.deploy import Kubectl
from shared import cpulabels
from shared.labels import SCHEDULABLE_LABEL
from tests.integration.realnodes.conftest import pods
from tests.integration.realnodes.test_live_change import _patch_kv, _restarts
from tests.integration.realnodes.test_story import REPO, _wait

pytestmark = pytest.mark.cluster
# Usable under TCG and accepted at admission, but obsolete by KubeVirt's default: no node
# is labelled with it.
ABSENT_MODEL = "kvm32"
NOWHERE = {"kubevirt-py.test/nowhere": "true"}  # pods that never schedule (spec checks only)


def _tiny(ns: str, name: str, domain: dict[str, Any] | None = None) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": name, "namespace": ns}
    vmi["spec"]["domain"].update(domain or {})
    return vmi


def _get(k: Kubectl, kind: str, ns: str, name: str) -> dict[str, Any]:
    out = k("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def _launcher(k: Kubectl, ns: str, vmi: str) -> dict[str, Any] | None:
    uid = _get(k, "vmi", ns, vmi).get("metadata", {}).get("uid")
    found = pods(k, ns, f"kubevirt.io/created-by={uid}") if uid else []
    return found[0] if found else None


def _cpu_labels(node: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = node["metadata"].get("labels", {})
    return {key: value for key, value in labels.items() if cpulabels.owned(key)}


def _labelled_nodes(k: Kubectl) -> list[dict[str, Any]] | None:
    nodes = json.loads(k("get", "nodes", "-l", SCHEDULABLE_LABEL, "-o", "json"))["items"]
    return nodes if len(nodes) == 2 and all(_cpu_labels(n) for n in nodes) else None


def test_both_nodes_carry_kubevirts_cpu_labels(real_stack: Kubectl) -> None:
    """Each node: models TCG runs (Westmere among them, no obsolete qemu64), the host model
    and its required features, the expanded host model's features, the vendor; all "true"."""
    nodes = _wait(lambda: _labelled_nodes(real_stack), 180, "CPU labels on both nodes")
    for node in nodes:
        labels = _cpu_labels(node)
        keys = " ".join(sorted(labels))
        assert cpulabels.model_label("Westmere") in labels, keys
        assert cpulabels.model_label("qemu64") not in labels, keys
        assert cpulabels.CPU_MODEL_MIGRATION_PREFIX + "Westmere" in labels, keys
        assert cpulabels.feature_label("sse4.2") in labels, keys
        for prefix in (
            cpulabels.HOST_MODEL_CPU_PREFIX,
            cpulabels.HOST_MODEL_FEATURES_PREFIX,
            cpulabels.CPU_VENDOR_PREFIX,
        ):
            assert any(key.startswith(prefix) for key in labels), (prefix, keys)
        assert set(labels.values()) == {"true"}, labels


def _unschedulable(k: Kubectl, ns: str, name: str) -> dict[str, Any] | None:
    status = _get(k, "vmi", ns, name).get("status", {})
    for cond in status.get("conditions", []):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return {"phase": status.get("phase"), **cond}
    return None


def test_an_absent_model_stays_pending_a_present_one_runs(
    real_stack: Kubectl, real_namespace: str
) -> None:
    """kvm32 (no node labels it): the pod selects its label (and avoids a forbidden
    feature's), the VMI stays Scheduling with PodScheduled=False, Unschedulable and the
    scheduler's message. Westmere with sse4.2 required and vme disabled: Running, the pod
    selecting both the model and the required feature."""
    k, ns = real_stack, real_namespace
    absent = {"cpu": {"model": ABSENT_MODEL, "features": [{"name": "sse2", "policy": "forbid"}]}}
    present = {
        "cpu": {
            "cores": 1,
            "model": "Westmere",
            "features": [{"name": "sse4.2"}, {"name": "vme", "policy": "disable"}],
        }
    }
    for name, domain in (("absent", absent), ("present", present)):
        k("apply", "-f", "-", stdin=json.dumps(_tiny(ns, name, domain)))
    cond = _wait(lambda: _unschedulable(k, ns, "absent"), 120, "absent Unschedulable")
    assert cond["reason"] == "Unschedulable" and cond["phase"] in ("Pending", "Scheduling")
    assert "node affinity/selector" in cond["message"], cond
    pod = _launcher(k, ns, "absent")
    assert pod is not None
    assert pod["spec"]["nodeSelector"][cpulabels.model_label(ABSENT_MODEL)] == "true"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    forbid = {"key": cpulabels.feature_label("sse2"), "operator": "DoesNotExist"}
    assert forbid in terms["nodeSelectorTerms"][0]["matchExpressions"]
    _wait(lambda: _get(k, "vmi", ns, "present").get("status", {}).get("phase") == "Running",
          300, "present Running", lambda: _get(k, "vmi", ns, "present").get("status"))  # fmt: skip
    selector = (_launcher(k, ns, "present") or {})["spec"]["nodeSelector"]
    assert selector[cpulabels.model_label("Westmere")] == "true"
    assert selector[cpulabels.feature_label("sse4.2")] == "true"
    assert cpulabels.feature_label("vme") not in selector
    assert _unschedulable(k, ns, "absent") is not None  # still Pending after the other ran


@pytest.fixture
def overcommit_restored(real_stack: Kubectl) -> Iterator[Kubectl]:
    """memoryOvercommit back to unset after the test."""
    yield real_stack
    _patch_kv(real_stack, {"developerConfiguration": {"memoryOvercommit": None}})


def _memory_request(k: Kubectl, ns: str) -> int | None:
    """A new never-scheduled VMI's launcher pod memory request (bytes), once it exists."""
    name = f"oc-{uuid.uuid4().hex[:6]}"
    vmi = _tiny(ns, name)
    vmi["spec"]["nodeSelector"] = NOWHERE
    k("apply", "-f", "-", stdin=json.dumps(vmi))
    pod = _wait(lambda: _launcher(k, ns, name), 60, f"{name}'s launcher pod")
    k("delete", "vmi", name, "-n", ns, "--wait=false")
    return int(pod["spec"]["containers"][0]["resources"]["requests"]["memory"])


def test_memory_overcommit_changes_new_pods_requests_live(
    overcommit_restored: Kubectl, real_namespace: str
) -> None:
    """memoryOvercommit 200 on the CR: a new 128 MiB VMI's pod asks 64 MiB less (guest *
    100 / 200, overhead unchanged); no virt-controller or virt-handler restarted."""
    k, ns = overcommit_restored, real_namespace
    restarts = _restarts(k)
    before = _memory_request(k, ns)
    assert before is not None
    _patch_kv(k, {"developerConfiguration": {"memoryOvercommit": 200}})
    expected = before - 64 * 1024 * 1024
    _wait(lambda: _memory_request(k, ns) == expected, 60, f"a new pod requesting {expected}")
    assert _restarts(k) == restarts


@pytest.fixture
def obsolete_restored(real_stack: Kubectl) -> Iterator[Kubectl]:
    """obsoleteCPUModels back to unset (KubeVirt's default list) after the test."""
    yield real_stack
    _patch_kv(real_stack, {"obsoleteCPUModels": None})


def _models(k: Kubectl) -> list[set[str]]:
    nodes = json.loads(k("get", "nodes", "-l", SCHEDULABLE_LABEL, "-o", "json"))["items"]
    prefix = cpulabels.CPU_MODEL_PREFIX
    return [{key[len(prefix) :] for key in _cpu_labels(n) if key.startswith(prefix)} for n in nodes]


def test_obsolete_models_from_the_cr_relabel_both_nodes_live(obsolete_restored: Kubectl) -> None:
    """obsoleteCPUModels {Penryn: true} on the CR replaces KubeVirt's default list: both
    nodes drop Penryn's label and gain qemu64's, without waiting for the 3-minute round."""
    k = obsolete_restored
    _patch_kv(k, {"obsoleteCPUModels": {"Penryn": True}})
    models = _wait(
        lambda: (m := _models(k)) and all("qemu64" in s and "Penryn" not in s for s in m) and m,
        60, "Penryn unlabelled and qemu64 labelled on both nodes", lambda: _models(k),
    )  # fmt: skip
    assert len(models) == 2 and all("Westmere" in s for s in models)
