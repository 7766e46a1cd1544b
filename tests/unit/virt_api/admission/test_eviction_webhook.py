"""The pods/eviction webhook: launcher pods of protected VMIs are held back with 429 (the
VMI marked for evacuation on a real eviction, never on a dry run), other pods pass, and an
API that does not answer holds the eviction back rather than letting it through; the
registration in the manifests matches what the server serves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.deploy import WEBHOOK_CONFIGURATIONS as DEPLOY_WEBHOOKS
from shared.kube import PODS, VMIS, NotFound, PatchType, Registry, Resource, TransportError
from shared.model import EvictionStrategy
from shared.model.validation import ValidationLimits
from tests.unit.controller.builders import pod_dict, vmi_dict
from virt_api.admission.defaults import Defaults
from virt_api.admission.eviction import EvictionAdmitter
from virt_api.admission.review import AdmissionRequest
from virt_api.admission.server import AppDeps, build_app

BASE = Path(__file__).resolve().parents[4] / "manifests" / "base"
S = EvictionStrategy


class FakeClient:
    """Pods and VMIs by (resource plural, name); records status patches."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]], *, down: bool = False):
        self.objects = objects
        self.patches: list[tuple[str, Mapping[str, Any], str | None]] = []
        self.down = down

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        if self.down:
            raise TransportError("connection refused")
        try:
            return self.objects[(resource.plural, name)]
        except KeyError:
            raise NotFound(404, "NotFound", f"{resource.plural} {name} not found") from None

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        assert isinstance(patch, Mapping)
        self.patches.append((name, patch, subresource))
        return {}


def launcher(*, phase: str = "Running", node: str = "node01") -> dict[str, Any]:
    pod = pod_dict("virt-launcher-vm1-abcde", phase=phase, node=node)
    pod["metadata"]["ownerReferences"] = [
        {"kind": "VirtualMachineInstance", "name": "vm1", "uid": "u", "controller": True}
    ]
    return pod


def running_vmi(strategy: str | None, *, migratable: bool = True) -> dict[str, Any]:
    raw = vmi_dict()
    raw["metadata"]["resourceVersion"] = "42"
    if strategy:
        raw["spec"]["evictionStrategy"] = strategy
    cond = {"type": "LiveMigratable", "status": "True" if migratable else "False"}
    raw["status"] = {"phase": "Running", "nodeName": "node01", "conditions": [cond]}
    return raw


def review(*, dry_run: bool = False, options: dict[str, Any] | None = None) -> AdmissionRequest:
    obj: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction"}
    if options:
        obj["deleteOptions"] = options
    return AdmissionRequest(
        uid="r1", kind="Eviction", operation="CREATE", namespace="ns",
        name="virt-launcher-vm1-abcde", obj=obj, old=None, dry_run=dry_run,
    )  # fmt: skip


async def answer(client: FakeClient, req: AdmissionRequest, default: S = S.NONE) -> dict[str, Any]:
    response = (await EvictionAdmitter(client=client, default=default).admit(req))["response"]
    assert response["uid"] == "r1"
    return dict(response)


def objects(pod: dict[str, Any], vmi: dict[str, Any] | None) -> dict[tuple[str, str], Any]:
    out = {(PODS.plural, "virt-launcher-vm1-abcde"): pod}
    if vmi is not None:
        out[(VMIS.plural, "vm1")] = vmi
    return out


async def test_evacuation_marks_the_vmi_and_answers_429() -> None:
    """LiveMigrate (here the cluster default) and migratable: the VMI's status gets
    evacuationNodeName = the pod's node, at the VMI's resourceVersion, and the eviction is
    refused with 429 and the descheduler's message."""
    client = FakeClient(objects(launcher(), running_vmi(None)))
    response = await answer(client, review(), default=S.LIVE_MIGRATE)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert response["status"]["message"] == 'Eviction triggered evacuation of VMI "ns/vm1"'
    body = {"metadata": {"resourceVersion": "42"}, "status": {"evacuationNodeName": "node01"}}
    assert client.patches == [("vm1", body, "status")]


@pytest.mark.parametrize(
    "req",
    [
        pytest.param(review(dry_run=True), id="request-dry-run"),
        pytest.param(review(options={"dryRun": ["All"]}), id="delete-options-dry-run"),
    ],
)
async def test_dry_runs_mark_nothing(req: AdmissionRequest) -> None:
    """A dry-run eviction gets the same 429 and leaves the VMI unmarked."""
    client = FakeClient(objects(launcher(), running_vmi("LiveMigrate")))
    response = await answer(client, req)
    assert response["status"]["code"] == 429 and client.patches == []


async def test_livemigrate_without_migratability_is_refused_with_the_reason() -> None:
    """LiveMigrate but not migratable: 429 saying why; nothing marked."""
    client = FakeClient(objects(launcher(), running_vmi("LiveMigrate", migratable=False)))
    response = await answer(client, review())
    assert response["status"]["code"] == 429
    assert "not live-migratable" in response["status"]["message"] and client.patches == []


@pytest.mark.parametrize(
    ("pod", "vmi", "default"),
    [
        pytest.param(launcher(), running_vmi(None), S.NONE, id="strategy-none"),
        pytest.param(
            launcher(), running_vmi("LiveMigrateIfPossible", migratable=False), S.NONE,
            id="if-possible-not-migratable",
        ),
        pytest.param(launcher(phase="Succeeded"), running_vmi(None), S.LIVE_MIGRATE,
                     id="pod-ended"),
        pytest.param(launcher(), None, S.LIVE_MIGRATE, id="vmi-gone"),
        pytest.param({"metadata": {"name": "virt-launcher-vm1-abcde", "labels": {}}},
                     running_vmi(None), S.LIVE_MIGRATE, id="not-a-launcher"),
    ],
)  # fmt: skip
async def test_evictions_that_pass(
    pod: dict[str, Any], vmi: dict[str, Any] | None, default: S
) -> None:
    """Not a launcher pod, an ended pod, a gone VMI, or a strategy that lets the VMI stop:
    allowed, nothing marked."""
    client = FakeClient(objects(pod, vmi))
    response = await answer(client, review(), default=default)
    assert response["allowed"] is True and client.patches == []


async def test_an_api_that_does_not_answer_holds_the_eviction_back() -> None:
    """The pod or VMI cannot be read: 429 with the error (the drain retries), not allowed."""
    response = await answer(FakeClient({}, down=True), review(), default=S.LIVE_MIGRATE)
    assert response["allowed"] is False and response["status"]["code"] == 429
    assert "connection refused" in response["status"]["message"]


def test_the_registration_matches_the_server() -> None:
    """The eviction webhook is served at /evict; its registration sends pods/eviction
    there, with failurePolicy Ignore (the budgets hold) and NoneOnDryRun; both caBundle
    patchers know the configuration."""
    counter = Registry().counter("c_total", "c", ("webhook", "kind", "allowed"))

    async def lookup(namespace: str, name: str) -> None:
        return None

    admitter = EvictionAdmitter(client=FakeClient({}), default=S.NONE)
    deps = AppDeps(
        defaults=Defaults(),
        limits=ValidationLimits(),
        lookup=lookup,
        requests=counter,
        evictions=admitter,
    )
    routes = build_app(deps).router.routes()
    served = {r.resource.canonical for r in routes if r.method == "POST" and r.resource}
    config = yaml.safe_load((BASE / "admission" / "eviction.yaml").read_text())
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == "/evict" and "/evict" in served
    assert (hook["failurePolicy"], hook["sideEffects"]) == ("Ignore", "NoneOnDryRun")
    assert hook["rules"][0]["resources"] == ["pods/eviction"]
    name = config["metadata"]["name"]
    assert ("validatingwebhookconfiguration", name) in DEPLOY_WEBHOOKS
    kvcerts = (BASE.parents[1] / "scripts" / "lib" / "kvcerts.py").read_text()
    assert f'"validatingwebhookconfiguration", "{name}"' in kvcerts
    assert "eviction.yaml" in (BASE / "admission" / "kustomization.yaml").read_text()
