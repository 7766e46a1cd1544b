"""spec.accessCredentials in the launcher pod (controller/services/volumes/credentials):
each Secret named once, a pod volume mounted read-only at
secret/<secretName>-access-cred, where the launcher reads the keys (KubeVirt's layout)."""

from __future__ import annotations

from tests.unit.controller.services.test_template_volumes import _mount, _pod, _raw, _volume

PRIVATE = "/var/run/kubevirt-private"


def test_access_credential_secrets_are_mounted_once_each() -> None:
    """Two credentials naming one Secret and one naming another: two pod volumes, each
    mounted read-only under secret/<name>-access-cred."""
    raw = _raw({"name": "root", "emptyDisk": {"capacity": "1Mi"}})
    agent = {"qemuGuestAgent": {"users": ["root"]}}
    raw["spec"]["accessCredentials"] = [
        {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}}, "propagationMethod": agent}},
        {"userPassword": {"source": {"secret": {"secretName": "pw"}},
                          "propagationMethod": {"qemuGuestAgent": {}}}},
        {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}},
                          "propagationMethod": {"qemuGuestAgent": {"users": ["guest"]}}}},
    ]  # fmt: skip
    pod = _pod(raw)
    for name in ("keys", "pw"):
        pod_volume = f"{name}-access-cred"
        assert _volume(pod, pod_volume) == {"name": pod_volume, "secret": {"secretName": name}}
        assert _mount(pod, pod_volume) == {
            "name": pod_volume,
            "mountPath": f"{PRIVATE}/secret/{name}-access-cred",
            "readOnly": True,
        }


def test_no_access_credentials_no_secret_volumes() -> None:
    """A VMI without accessCredentials gets no -access-cred volume."""
    pod = _pod(_raw({"name": "root", "emptyDisk": {"capacity": "1Mi"}}))
    assert not [v for v in pod["spec"]["volumes"] if v["name"].endswith("-access-cred")]
