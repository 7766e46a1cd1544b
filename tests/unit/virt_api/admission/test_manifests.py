"""The webhook registration in manifests/base agrees with what the controller serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shared.kube import Registry
from shared.model.instancetype import INSTANCETYPE_KINDS
from shared.model.validation import ValidationLimits
from virt_api.admission.config import DEFAULT_PORT
from virt_api.admission.defaults import Defaults
from virt_api.admission.server import AppDeps, build_app
from virt_api.admission.validate import KINDS

BASE = Path(__file__).resolve().parents[4] / "manifests" / "base"


def app() -> Any:
    async def lookup(namespace: str, name: str) -> None:
        return None

    counter = Registry().counter("c_total", "c", ("webhook", "kind", "allowed"))
    return build_app(
        AppDeps(defaults=Defaults(), limits=ValidationLimits(), lookup=lookup, requests=counter)
    )


def configurations() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((BASE / "admission" / "webhooks.yaml").read_text()))


def test_every_webhook_fails_closed_on_the_admission_port() -> None:
    """failurePolicy Fail, the virt-api Service's admission port, a path the server serves."""
    served = {r.resource.canonical for r in app().router.routes() if r.method == "POST"}
    assert served == {"/mutate", "/validate"}
    for config in configurations():
        for hook in config["webhooks"]:
            assert hook["failurePolicy"] == "Fail"
            assert hook["sideEffects"] == "None"
            service = hook["clientConfig"]["service"]
            assert (service["name"], service["namespace"]) == ("virt-api", "kubevirt")
            assert service["port"] == DEFAULT_PORT
            assert service["path"] in served


def test_validation_covers_every_kind_and_the_service_has_the_port() -> None:
    """VMIs, VMs, VMIMs, the KubeVirt CR, MigrationPolicies, replica sets, pools, the four
    instancetype kinds, DataVolumes, snapshots, restores, clones, backups and trackers are validated; the base adds the
    admission port to virt-api."""
    (validator,) = [c for c in configurations() if c["kind"] == "ValidatingWebhookConfiguration"]
    resources = {r for h in validator["webhooks"] for rule in h["rules"] for r in rule["resources"]}
    assert resources == {
        "virtualmachineinstances",
        "virtualmachines",
        "virtualmachineinstancemigrations",
        "kubevirts",
        "migrationpolicies",
        "virtualmachineinstancereplicasets",
        "virtualmachinepools",
        *(cls.PLURAL for cls in INSTANCETYPE_KINDS),
        "datavolumes",
        "virtualmachineexports",
        "virtualmachinesnapshots",
        "virtualmachinerestores",
        "virtualmachineclones",
        "virtualmachinebackups",
        "virtualmachinebackuptrackers",
    }
    assert len(KINDS) == len(resources)
    kustomization = (BASE / "kustomization.yaml").read_text()
    assert f"port: {DEFAULT_PORT}, targetPort: {DEFAULT_PORT}" in kustomization
    assert "- admission" in kustomization
