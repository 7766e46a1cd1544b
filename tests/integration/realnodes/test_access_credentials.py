"""spec.accessCredentials on real nodes, one tiny-guest VM: Secrets mounted in the launcher
pod; a noCloud key in the NoCloud user data; a key added by `virtctl-py credentials
add-ssh-key` reaching root's authorized_keys through qemu-ga while the guest runs and then
used by `virtctl-py ssh`; passwords set through qemu-ga (virtctl-py set-password, then
KubeVirt's own virtctl) landing in the guest's /etc/shadow; the key removed live with
`virtctl-py credentials remove-ssh-key` and refused afterwards; the VMI's
AccessCredentialsSynchronized condition True."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_remote_access import virtctl_py
from tests.integration.realnodes.test_story import REPO, _serial, _vmi, _wait
from tests.integration.subresources.test_upstream_virtctl import upstream_virtctl

pytestmark = pytest.mark.cluster
__all__ = ["upstream_virtctl"]
KEYS, PASSWORDS, NOCLOUD = "creds-keys", "creds-pw", "creds-nocloud"
# A Secret's change reaches the pod's files at the kubelet's next sync of the pod (about a
# minute), then the launcher's next look (seconds): waits allow several of those.
SECRET_PROPAGATION = 420
SSH_TIMEOUT = 120


def _keypair(directory: Path, name: str) -> tuple[Path, str]:
    key = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60
    )
    return key, key.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Two fresh ed25519 key pairs: one added live, one propagated by noCloud."""
    directory = tmp_path_factory.mktemp("creds-ssh")
    return {name: _keypair(directory, name) for name in ("live", "nocloud")}


@pytest.fixture(scope="module")
def namespace(real_stack: Kubectl) -> Iterator[str]:
    ns = f"t-creds-{uuid.uuid4().hex[:6]}"
    real_stack("create", "namespace", ns)
    yield ns
    real_stack("delete", "vm", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False)
    real_stack("delete", "namespace", ns, "--wait=false", check=False)


def _secret(ns: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns}, "data": encoded}  # fmt: skip


def _credentials() -> list[dict[str, Any]]:
    def source(name: str) -> dict[str, Any]:
        return {"secret": {"secretName": name}}

    return [
        {"sshPublicKey": {"source": source(KEYS),
                          "propagationMethod": {"qemuGuestAgent": {"users": ["root"]}}}},
        {"userPassword": {"source": source(PASSWORDS),
                          "propagationMethod": {"qemuGuestAgent": {}}}},
        {"sshPublicKey": {"source": source(NOCLOUD), "propagationMethod": {"noCloud": {}}}},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def guest(
    real_stack: Kubectl,
    real_cluster: Cluster,
    namespace: str,
    keys: dict[str, tuple[Path, str]],
) -> dict[str, Any]:
    """The demo VM with the three credentials, Running with its services up; its Secrets
    owned by the VM (as `virtctl credentials` expects of Secrets it edits)."""
    k, ns = real_stack, namespace
    for name, data in (
        (KEYS, {}),
        (PASSWORDS, {"root": "first-pass"}),
        (NOCLOUD, {"key": keys["nocloud"][1]}),
    ):
        k("apply", "-f", "-", stdin=json.dumps(_secret(ns, name, data)))
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    vm["spec"]["template"]["spec"]["accessCredentials"] = _credentials()
    k("apply", "-f", "-", stdin=json.dumps(vm))
    uid = json.loads(k("get", "vm", "demo", "-n", ns, "-o", "json"))["metadata"]["uid"]
    owner = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "demo", "uid": uid}
    for name in (KEYS, PASSWORDS):
        patch = json.dumps({"metadata": {"ownerReferences": [owner]}})
        k("patch", "secret", name, "-n", ns, "--type=merge", "-p", patch)
    vmi = _wait(lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Running" and v,
                300, "VMI Running", lambda: _vmi(k, ns).get("status"))  # fmt: skip
    _wait(lambda: "KUBEVIRT-PY-SERVICES-UP" in _serial(real_cluster, vmi), 240,
          "the guest's services", lambda: _serial(real_cluster, vmi)[-800:])  # fmt: skip
    up: dict[str, Any] = vmi
    return up


def _synchronized(k: Kubectl, ns: str) -> dict[str, Any] | None:
    conditions = _vmi(k, ns).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "AccessCredentialsSynchronized"), None)


def _ssh(kubeconfig: Path, ns: str, key: Path, command: str) -> subprocess.CompletedProcess[str]:
    opts = ["-i", str(key), "-t", "-o StrictHostKeyChecking=no",
            "-t", "-o UserKnownHostsFile=/dev/null", "-t", "-o BatchMode=yes"]  # fmt: skip
    argv = virtctl_py(kubeconfig, ns, "ssh", "root@vmi/demo", *opts, "-c", command)
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=SSH_TIMEOUT, cwd=REPO, check=False
        )
    except subprocess.TimeoutExpired as e:  # a hung attempt is one more failed try
        return subprocess.CompletedProcess(argv, -1, "", f"timed out: {e}")


def _run(argv: list[str]) -> str:
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert ran.returncode == 0, f"{argv[-6:]}: {ran.stderr}"
    return ran.stdout + ran.stderr


def _password_is(kubeconfig: Path, ns: str, key: Path, password: str) -> bool:
    """root's /etc/shadow hash is `password`'s (hashed again in the guest with its salt)."""
    check = (
        "h=$(grep '^root:' /etc/shadow | cut -d: -f2); s=$(echo \"$h\" | cut -d'$' -f3); "
        f'[ -n "$s" ] && [ "$(mkpasswd -m sha512 -S "$s" \'{password}\')" = "$h" ] '
        "&& echo PASSWORD-MATCHES"
    )
    return "PASSWORD-MATCHES" in _ssh(kubeconfig, ns, key, check).stdout


def test_keys_and_passwords_follow_their_secrets(
    guest: dict[str, Any],
    real_stack: Kubectl,
    real_cluster: Cluster,
    namespace: str,
    keys: dict[str, tuple[Path, str]],
    upstream_virtctl: Path,
) -> None:
    """Synchronized once the agent is up; a key added by virtctl-py reaches the running
    guest and ssh gets in with it; the noCloud key is in the NoCloud user data; passwords
    set by virtctl-py and by KubeVirt's virtctl land in /etc/shadow; the key removed by
    virtctl-py is refused afterwards; the condition stays True."""
    k, ns, kubeconfig = real_stack, namespace, real_cluster.kubeconfig
    live_key, live_pub = keys["live"]
    _wait(lambda: (c := _synchronized(k, ns)) is not None and c["status"] == "True", 300,
          "AccessCredentialsSynchronized", lambda: _synchronized(k, ns))  # fmt: skip

    said = _run(virtctl_py(kubeconfig, ns, "credentials", "add-ssh-key", "--user", "root",
                           "--value", live_pub, "demo"))  # fmt: skip
    assert f'Successfully added the key to secret "{KEYS}"' in said
    _run(virtctl_py(kubeconfig, ns, "credentials", "set-password", "-u", "root",
                    "-p", "second-pass", "demo"))  # fmt: skip
    _wait(lambda: "CREDS-SSH-OK" in _ssh(kubeconfig, ns, live_key, "echo CREDS-SSH-OK").stdout,
          SECRET_PROPAGATION, "ssh with the added key",
          lambda: _ssh(kubeconfig, ns, live_key, "true").stderr[-400:])  # fmt: skip
    user_data = _ssh(kubeconfig, ns, live_key, "cat /mnt/cidata/user-data").stdout
    assert keys["nocloud"][1] in user_data and "ssh_authorized_keys" in user_data
    _wait(lambda: _password_is(kubeconfig, ns, live_key, "second-pass"), SECRET_PROPAGATION,
          "root's password set by virtctl-py")  # fmt: skip

    upstream = [str(upstream_virtctl), "--kubeconfig", str(kubeconfig), "-n", ns]
    _run([*upstream, "credentials", "set-password", "--user", "root",
          "--password", "third-pass", "demo"])  # fmt: skip
    _wait(lambda: _password_is(kubeconfig, ns, live_key, "third-pass"), SECRET_PROPAGATION,
          "root's password set by KubeVirt's virtctl")  # fmt: skip

    _run(virtctl_py(kubeconfig, ns, "credentials", "remove-ssh-key", "-u", "root",
                    "--value", live_pub, "demo"))  # fmt: skip
    stored = json.loads(k("get", "secret", KEYS, "-n", ns, "-o", "json")).get("data") or {}
    assert not any(live_pub in base64.b64decode(v).decode() for v in stored.values())

    def refused() -> bool:
        ran = _ssh(kubeconfig, ns, live_key, "echo STILL-IN")
        return ran.returncode != 0 and "Permission denied" in ran.stderr

    _wait(refused, SECRET_PROPAGATION, "ssh refused once the key is removed")
    final = _synchronized(k, ns)
    assert final is not None and final["status"] == "True", final
    assert _vmi(k, ns)["status"]["phase"] == "Running"
