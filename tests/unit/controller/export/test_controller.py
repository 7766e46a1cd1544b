"""The export controller over a fake API server: a claim export makes its token Secret,
Service, certificate Secret and exporter pod once; Ready with the CA once the pod is; a VMI
starting on the claim takes it back to Pending (InUse) and deletes the pod; a tokenSecretRef
that does not exist yet keeps it Pending without a pod."""

from __future__ import annotations

import base64
import dataclasses
from datetime import UTC, datetime
from typing import Any, cast

from controller.export.controller import ExportController, ExporterImage
from controller.informers import build_informers
from shared.kube import (
    PODS,
    PVCS,
    SERVICES,
    KubeClient,
    QueueConfig,
    Registry,
    StatusWriter,
    WorkQueue,
)
from shared.kube.resources import SECRETS, VMEXPORTS
from shared.model import VirtualMachineInstance
from shared.model.export import VirtualMachineExport
from tests.unit.controller import builders
from tests.unit.controller.replicaset.test_controller import FleetApi
from tests.unit.shared.kube.fakes import FakeClock, FakeTimers

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def export(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "export.kubevirt.io/v1beta1",
        "kind": "VirtualMachineExport",
        "metadata": {"name": "exp", "namespace": "ns", "uid": "u1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"source": {"kind": "PersistentVolumeClaim", "name": "disk"}, **spec},
    }  # fmt: skip


def rig() -> tuple[FleetApi, ExportController, Any]:
    api = FleetApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    clock = FakeClock()
    deps = builders.deps(client, informers, registry=registry)
    ctl = ExportController(
        dataclasses.replace(deps, clock=lambda: NOW),
        queue=WorkQueue(QueueConfig(name="export"), registry=registry, clock=clock,
                        timers=FakeTimers(clock)),
        writer=StatusWriter(client, VMEXPORTS, model=VirtualMachineExport, registry=registry),
        exporter=ExporterImage(image="launcher:dev"),
    )  # fmt: skip
    api.seed(PVCS, {"metadata": {"name": "disk", "namespace": "ns"}, "spec": {},
                    "status": {"phase": "Bound"}})  # fmt: skip
    refresh(api, informers)
    return api, ctl, informers


def refresh(api: FleetApi, informers: Any) -> None:
    stored = (
        api.stored(VMEXPORTS, "ns/exp") if (VMEXPORTS.plural, "ns/exp") in api.objects else None
    )
    if stored is not None:
        informers.exports.store.upsert("ns/exp", VirtualMachineExport.from_dict(stored))


def status(api: FleetApi) -> dict[str, Any]:
    return cast(dict[str, Any], api.stored(VMEXPORTS, "ns/exp").get("status") or {})


async def test_claim_export_goes_ready_then_pending_when_a_vmi_uses_the_claim() -> None:
    """Objects made once over two syncs; Ready with the CA from the certificate Secret; a
    running VMI on the claim: Pending (InUse) and the exporter pod deleted."""
    api, ctl, informers = rig()
    api.seed(VMEXPORTS, export())
    refresh(api, informers)
    await ctl.sync("ns/exp")
    await ctl.sync("ns/exp")
    creates = [c for c in api.calls if c[0] == "create"]
    assert sorted(creates) == sorted(
        [("create", "secrets"), ("create", "services"), ("create", "secrets"), ("create", "pods")]
    )
    assert status(api)["phase"] == "Pending"
    pod = api.stored(PODS, "ns/virt-export-exp")
    assert pod["spec"]["containers"][0]["image"] == "launcher:dev"
    assert api.stored(SERVICES, "ns/virt-export-exp")["spec"]["ports"][0]["port"] == 443

    pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    refresh(api, informers)
    await ctl.sync("ns/exp")
    ready = status(api)
    assert ready["phase"] == "Ready"
    ca = base64.b64decode(api.stored(SECRETS, "ns/virt-export-exp-certs")["data"]["ca.crt"])
    assert ready["links"]["internal"]["cert"] == ca.decode()
    assert ready["tokenSecretRef"] == "export-token-exp"

    vmi = builders.vmi_dict("user")
    vmi["metadata"]["namespace"] = "ns"
    vmi["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "disk"}}]
    vmi["status"] = {"phase": "Running"}
    informers.vmis.store.upsert("ns/user", VirtualMachineInstance.from_dict(vmi))
    refresh(api, informers)
    await ctl.sync("ns/exp")
    pending = status(api)
    assert pending["phase"] == "Pending" and "links" not in pending
    (cond,) = pending["conditions"]
    assert cond["reason"] == "InUse" and "VirtualMachineInstance user" in cond["message"]
    assert (PODS.plural, "ns/virt-export-exp") not in api.objects


async def test_missing_token_secret_ref_keeps_it_pending_without_a_pod() -> None:
    """spec.tokenSecretRef names a Secret not made yet (KubeVirt's virtctl makes it just
    after the export): Pending (TokenSecretMissing), no pod, no Secret made in its place."""
    api, ctl, informers = rig()
    api.seed(VMEXPORTS, export(tokenSecretRef="secret-exp"))
    refresh(api, informers)
    await ctl.sync("ns/exp")
    (cond,) = status(api)["conditions"]
    assert cond["reason"] == "TokenSecretMissing" and "spec.tokenSecretRef" in cond["message"]
    assert (PODS.plural, "ns/virt-export-exp") not in api.objects
    assert [c for c in api.calls if c == ("create", "secrets")] == []
