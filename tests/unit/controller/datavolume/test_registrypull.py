"""A registry DataVolume's pull: by the importer pod itself (pullMethod pod, CDI's default
when none is set) with the Secret's keys as environment variables and the ConfigMap mounted
at /certs; by the node's runtime with pullMethod node; bad fields refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from controller.datavolume.pods import worker_pod
from controller.datavolume.registrypull import CERT_VOLUME, PULL_CONTAINER
from shared import podlayout
from shared.model.datavolume_spec import SpecError, target
from shared.registrypull import ACCESS_KEY_ENV, CERT_DIR, PULL_COMMAND, SECRET_KEY_ENV
from tests.unit.controller.datavolume.test_logic import dv

IMAGE = "198.18.0.1:5443/kubevirt-py/tiny-guest:v1"
LAUNCHER = "registry.local/kubevirt-py/virt-launcher:dev"


def _pod(registry: dict[str, Any]) -> dict[str, Any]:
    d = dv({"registry": {"url": f"docker://{IMAGE}", **registry}})
    return worker_pod(d, target(d), image=LAUNCHER, pull_policy="IfNotPresent")


def _inits(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["spec"]["initContainers"]}


def test_pod_pull_runs_the_importer_client_with_secret_and_cas() -> None:
    """pullMethod pod with secretRef and certConfigMap: one init container runs
    virt-importer-py from the launcher image on the image, writing where the importer
    script reads; accessKeyId/secretKey come from the Secret; the CAs are at /certs."""
    pod = _pod({"pullMethod": "pod", "secretRef": "reg-auth", "certConfigMap": "reg-ca"})
    (pull,) = pod["spec"]["initContainers"]
    assert pull["name"] == PULL_CONTAINER and pull["image"] == LAUNCHER
    assert pull["command"] == [PULL_COMMAND]
    out = f"{podlayout.CONTAINER_DISKS_DIR}/import/{podlayout.DISK_FILE}"
    assert pull["args"] == ["--image", IMAGE, "--out", out, "--cert-dir", CERT_DIR]
    assert pull["env"] == [
        {"name": ACCESS_KEY_ENV,
         "valueFrom": {"secretKeyRef": {"name": "reg-auth", "key": "accessKeyId"}}},
        {"name": SECRET_KEY_ENV,
         "valueFrom": {"secretKeyRef": {"name": "reg-auth", "key": "secretKey"}}},
    ]  # fmt: skip
    assert {"name": CERT_VOLUME, "mountPath": CERT_DIR, "readOnly": True} in pull["volumeMounts"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[CERT_VOLUME] == {"name": CERT_VOLUME, "configMap": {"name": "reg-ca"}}
    assert podlayout.CONTAINER_DISKS_VOLUME in volumes
    assert pod["spec"]["containers"][0]["args"][-1] == out  # the script converts that file


def test_a_secret_ref_without_pull_method_pulls_in_the_pod() -> None:
    """No pullMethod but a secretRef: the importer pulls (the node could not use it)."""
    pull = _inits(_pod({"secretRef": "reg-auth"}))[PULL_CONTAINER]
    assert "--cert-dir" not in pull["args"]
    assert [e["name"] for e in pull["env"]] == [ACCESS_KEY_ENV, SECRET_KEY_ENV]


def test_pod_pull_without_credentials_or_cas_sets_neither() -> None:
    """pullMethod pod alone: an anonymous pull trusting the system's CAs."""
    pull = _inits(_pod({"pullMethod": "pod"}))[PULL_CONTAINER]
    assert "env" not in pull and "--cert-dir" not in pull["args"]


def test_node_pull_runs_the_source_image() -> None:
    """pullMethod node: the node's runtime pulls the source image, run as an init
    container copying its disk; the importer does not pull."""
    inits = _inits(_pod({"pullMethod": "node"}))
    assert PULL_CONTAINER not in inits
    assert inits["source-image"]["image"] == IMAGE


def test_no_pull_method_is_cdis_default_the_pod() -> None:
    """No pullMethod, no credentials: CDI's default, the importer pod pulls (anonymously,
    trusting the system's CAs); the node runs no source-image container."""
    inits = _inits(_pod({}))
    assert "source-image" not in inits
    assert inits[PULL_CONTAINER]["image"] == LAUNCHER
    assert "env" not in inits[PULL_CONTAINER]


@pytest.mark.parametrize(
    ("registry", "message"),
    [
        pytest.param({"pullMethod": "Pod"}, "spec.source.registry.pullMethod: must be pod or node",
                     id="bad-method"),
        pytest.param({"pullMethod": "node", "secretRef": "s"},
                     "spec.source.registry.secretRef: not used by pullMethod node", id="node-secret"),
        pytest.param({"pullMethod": "node", "certConfigMap": "c"},
                     "spec.source.registry.certConfigMap: not used by pullMethod node",
                     id="node-cas"),
        pytest.param({"secretRef": "Bad_Name"},
                     "spec.source.registry.secretRef: must be a DNS-1123 subdomain", id="secret-name"),
        pytest.param({"certConfigMap": ""},
                     "spec.source.registry.certConfigMap: must be a DNS-1123 subdomain",
                     id="cas-empty"),
        pytest.param({"platform": {"architecture": "arm64"}},
                     "spec.source.registry.platform: not supported", id="platform"),
    ],
)  # fmt: skip
def test_bad_registry_fields_are_refused_by_name(registry: dict[str, Any], message: str) -> None:
    """Each bad registry field fails the DataVolume's spec, naming the field."""
    d = dv({"registry": {"url": f"docker://{IMAGE}", **registry}})
    with pytest.raises(SpecError, match=message.replace(".", r"\.")):
        target(d)
