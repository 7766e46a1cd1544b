"""Config volumes in the launcher pod (controller/services/volumes/config, cloudinit): each object a
pod volume the kubelet fills, mounted read-only under the private dir where the launcher
looks (KubeVirt's source dirs); the controller reads no Secret itself. A serviceAccount
volume makes the pod run as that account with its token, ca.crt and namespace projected;
cloud-init Secrets are mounted at secret/<volume>-udata and -ndata."""

from __future__ import annotations

from typing import Any

from tests.unit.controller.services.test_template import compute
from tests.unit.controller.services.test_template_volumes import _mount, _pod, _raw, _volume

PRIVATE = "/var/run/kubevirt-private"


def test_config_map_secret_and_downward_api_are_mounted_read_only() -> None:
    """configMap (optional kept), secret and downwardAPI (its fields as items): pod volumes
    named as the VMI's, mounted read-only at config-map/, secret/, downwardapi/<volume>."""
    field = {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
    pod = _pod(
        _raw(
            {"name": "cfg", "configMap": {"name": "app", "optional": True, "volumeLabel": "L"}},
            {"name": "sec", "secret": {"secretName": "creds"}},
            {"name": "dw", "downwardAPI": {"fields": [field]}},
        )
    )
    assert _volume(pod, "cfg") == {"name": "cfg", "configMap": {"name": "app", "optional": True}}
    assert _volume(pod, "sec") == {"name": "sec", "secret": {"secretName": "creds"}}
    assert _volume(pod, "dw") == {"name": "dw", "downwardAPI": {"items": [field]}}
    for name, subdir in (("cfg", "config-map"), ("sec", "secret"), ("dw", "downwardapi")):
        mount = {"name": name, "mountPath": f"{PRIVATE}/{subdir}/{name}", "readOnly": True}
        assert _mount(pod, name) == mount
    assert "serviceAccountName" not in pod["spec"]
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_a_service_account_volume_runs_the_pod_as_that_account() -> None:
    """serviceAccountName on the pod; a projected volume of token, ca.crt (the
    kube-root-ca.crt ConfigMap) and namespace, for the compute container only."""
    pod = _pod(_raw({"name": "sa", "serviceAccount": {"serviceAccountName": "robot"}}))
    assert pod["spec"]["serviceAccountName"] == "robot"
    assert pod["spec"]["automountServiceAccountToken"] is False
    sources = _volume(pod, "sa")["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert sources[1]["configMap"] == {
        "name": "kube-root-ca.crt",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    ns_item = sources[2]["downwardAPI"]["items"][0]
    assert (ns_item["path"], ns_item["fieldRef"]["fieldPath"]) == (
        "namespace",
        "metadata.namespace",
    )
    mount = {"name": "sa", "mountPath": f"{PRIVATE}/service-account/sa", "readOnly": True}
    assert _mount(pod, "sa") == mount
    for init in pod["spec"]["initContainers"]:
        assert all(m["name"] != "sa" for m in init.get("volumeMounts", []))


def test_cloud_init_secrets_are_mounted_where_the_launcher_reads_them() -> None:
    """secretRef → pod volume <volume>-udata of the Secret at secret/<volume>-udata;
    networkDataSecretRef → -ndata; both for cloudInitNoCloud and cloudInitConfigDrive;
    inline data adds nothing."""
    refs = {"secretRef": {"name": "ud"}, "networkDataSecretRef": {"name": "nd"}}
    pod = _pod(
        _raw(
            {"name": "ci", "cloudInitNoCloud": refs},
            {"name": "drive", "cloudInitConfigDrive": {"secretRef": {"name": "ud2"}}},
            {"name": "inline", "cloudInitNoCloud": {"userData": "#cloud-config"}},
        )
    )
    expected: list[tuple[str, str]] = [
        ("ci-udata", "ud"),
        ("ci-ndata", "nd"),
        ("drive-udata", "ud2"),
    ]
    for pod_volume, secret in expected:
        assert _volume(pod, pod_volume) == {"name": pod_volume, "secret": {"secretName": secret}}
        mount = {
            "name": pod_volume,
            "mountPath": f"{PRIVATE}/secret/{pod_volume}",
            "readOnly": True,
        }
        assert _mount(pod, pod_volume) == mount
    names: list[Any] = [v["name"] for v in pod["spec"]["volumes"]]
    assert not [n for n in names if n.startswith("inline")]
    assert len(compute(pod)["volumeMounts"]) == 4 + 3  # the pod's own 4 + the three secrets
