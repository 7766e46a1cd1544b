"""virtctl-py credentials: KubeVirt v1.8 virtctl's flags and its Secret edits — a key
added as a new Secret key (the Secret's .data made when missing), a key already there
reported, a key removed line by line (emptied keys dropped), a password under the user's
key, a new Secret owned by the VM plus a guest-agent credential appended (the list made
when missing), refusals of Secrets the VM does not own (unless --force) and of a new Secret
for a running VM."""

from __future__ import annotations

import argparse
import base64
import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from shared.kube import NotFound, Resource
from shared.kube.errors import ApiError
from virtctl_py import cli, credentials
from virtctl_py.errors import CliError
from virtctl_py.session import Target

TARGET = Target(kubeconfig=Path("/k"), context=None, namespace="ns")
KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA alice@host"
KEY_B = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ bob@host"
VM_META = {"name": "vm1", "namespace": "ns", "uid": "u-1"}
OWNER = [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1", "uid": "u-1"}]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(value: str) -> str:
    return base64.b64decode(value).decode()


def _apply(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add/test on object paths: enough for these patches."""
    out = copy.deepcopy(obj)
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        node: Any = out
        for step in parents:
            if not isinstance(node, dict) or node.get(step) is None:
                raise ApiError(422, "Invalid", f"missing path {op['path']}")
            node = node[step]
        if op["op"] == "test":
            if node.get(last) != op["value"]:
                raise ApiError(422, "Invalid", f"test failed at {op['path']}")
        else:
            node[last] = op["value"]
    return out


def _apply_ops(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The patch's ops in order; an append (`/-`) needs its list to exist (422 else)."""
    for op in ops:
        if op["path"].endswith("/-"):  # append: the list must exist
            parent = op["path"][:-2]
            node: Any = obj
            for step in parent.strip("/").split("/"):
                node = node.get(step) if isinstance(node, dict) else None
            if not isinstance(node, list):
                raise ApiError(422, "Invalid", f"no list at {parent}")
            obj = copy.deepcopy(obj)
            target: Any = obj
            for step in parent.strip("/").split("/"):
                target = target[step]
            target.append(op["value"])
        else:
            obj = _apply(obj, [op])
    return obj


class FakeKube:
    """VMs, VMIs and Secrets by name; JSON patches applied; every write recorded."""

    def __init__(self, vm: dict[str, Any], *secrets: dict[str, Any], running: bool = False):
        self.objects: dict[tuple[str, str], dict[str, Any]] = {("virtualmachines", "vm1"): vm}
        if running:
            self.objects["virtualmachineinstances", "vm1"] = {"metadata": dict(VM_META)}
        for s in secrets:
            self.objects["secrets", s["metadata"]["name"]] = s
        self.writes: list[str] = []

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        try:
            return copy.deepcopy(self.objects[resource.plural, name])
        except KeyError:
            raise NotFound(404, "NotFound", name) from None

    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body))
        obj["metadata"]["name"] = obj["metadata"].pop("generateName") + "abcde"
        self.objects[resource.plural, obj["metadata"]["name"]] = obj
        self.writes.append(f"create {resource.plural}/{obj['metadata']['name']}")
        return obj

    def patch(
        self, resource: Resource, name: str, patch: list[dict[str, Any]], **_: Any
    ) -> dict[str, Any]:
        self.writes.append(f"patch {resource.plural}/{name}")
        self.objects[resource.plural, name] = _apply_ops(self.objects[resource.plural, name], patch)
        return self.objects[resource.plural, name]

    def update(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self.writes.append(f"update {resource.plural}/{name}")
        self.objects[resource.plural, name] = copy.deepcopy(dict(body))
        return self.objects[resource.plural, name]

    def secret(self, name: str) -> dict[str, Any]:
        return self.objects["secrets", name]


def _vm(*creds: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"domain": {}}
    if creds:
        spec["accessCredentials"] = list(creds)
    return {"metadata": dict(VM_META), "spec": {"template": {"spec": spec}}}


def _ssh(secret: str, *users: str) -> dict[str, Any]:
    return {"sshPublicKey": {"source": {"secret": {"secretName": secret}},
                             "propagationMethod": {"qemuGuestAgent": {"users": list(users)}}}}  # fmt: skip


def _pw(secret: str) -> dict[str, Any]:
    return {"userPassword": {"source": {"secret": {"secretName": secret}},
                             "propagationMethod": {"qemuGuestAgent": {}}}}  # fmt: skip


def _secret(name: str, data: dict[str, str] | None, *, owned: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owned:
        meta["ownerReferences"] = OWNER
    out: dict[str, Any] = {"metadata": meta}
    if data is not None:
        out["data"] = {k: _b64(v) for k, v in data.items()}
    return out


def _args(*argv: str) -> argparse.Namespace:
    return cli.build().parse_args(["credentials", *argv])


def _run(kube: FakeKube, *argv: str) -> str:
    return credentials.credentials(kube, TARGET, _args(*argv))  # type: ignore[arg-type]


def test_kubevirt_flags_parse() -> None:
    """-u/--user is the guest user (kubectl's --user keeps its own meaning elsewhere);
    --file/--value and --create-secret/--update-secret exclude each other."""
    ns = _args("add-ssh-key", "-u", "root", "-f", "k.pub", "vm1", "--create-secret")
    assert (ns.action, ns.guest_user, ns.file, ns.name, ns.create_secret) == (
        "add-ssh-key", "root", "k.pub", "vm1", True
    )  # fmt: skip
    assert ns.user is None
    assert _args("set-password", "--user", "root", "--password", "x", "vm1").password == "x"
    for bad in (
        ["add-ssh-key", "-u", "r", "-f", "f", "--value", "v", "vm1"],
        ["add-ssh-key", "-u", "r", "--create-secret", "--update-secret", "vm1"],
        ["set-password", "-u", "r", "vm1"],
        ["remove-ssh-key", "--value", "v", "vm1"],
    ):
        with pytest.raises(SystemExit):
            _args(*bad)


def test_add_key_adds_a_secret_key_making_data_when_missing() -> None:
    """The user's Secret has no .data: a second patch makes it; the key is one new
    ssh-key-XXXXXX entry."""
    kube = FakeKube(_vm(_ssh("keys", "root")), _secret("keys", None))
    out = _run(kube, "add-ssh-key", "-u", "root", "--value", KEY_A, "vm1")
    assert out == 'Successfully added the key to secret "keys"'
    data = kube.secret("keys")["data"]
    ((name, value),) = data.items()
    assert name.startswith("ssh-key-") and len(name) == len("ssh-key-") + 6
    assert _text(value) == KEY_A


def test_add_a_key_already_there_changes_nothing() -> None:
    """A line of the Secret starts with the key: reported, no write."""
    kube = FakeKube(_vm(_ssh("keys", "root")), _secret("keys", {"k": f"{KEY_B}\n{KEY_A}\n"}))
    out = _run(kube, "add-ssh-key", "-u", "root", "--value", KEY_A, "vm1")
    assert out == 'Secret "keys" already contains this SSH key.'
    assert kube.writes == []


def test_a_secret_the_vm_does_not_own_needs_force(tmp_path: Path) -> None:
    """Refused naming the Secret and the VM; --force edits it (the key read from --file)."""
    kube = FakeKube(_vm(_ssh("keys", "root")), _secret("keys", {}, owned=False))
    with pytest.raises(CliError, match="secret keys does not have an owner reference pointing"):
        _run(kube, "add-ssh-key", "-u", "root", "--value", KEY_A, "vm1")
    (tmp_path / "k.pub").write_text(KEY_A + "\n")
    _run(kube, "add-ssh-key", "-u", "root", "-f", str(tmp_path / "k.pub"), "vm1", "--force")
    assert [_text(v) for v in kube.secret("keys")["data"].values()] == [KEY_A]


def test_add_key_without_a_secret_creates_one_and_the_credential() -> None:
    """No Secret for the user: a Secret controlled by the VM (generateName vm1-ssh-key-)
    and a qemuGuestAgent credential appended, the list made when the VM has none; refused
    while the VM runs unless --force."""
    kube = FakeKube(_vm(), running=True)
    with pytest.raises(CliError, match=r"virtual machine vm1 is running\. Use --force"):
        _run(kube, "add-ssh-key", "-u", "root", "--value", KEY_A, "vm1")
    _run(kube, "add-ssh-key", "-u", "root", "--value", KEY_A, "vm1", "--force")
    secret = kube.secret("vm1-ssh-key-abcde")
    assert secret["metadata"]["ownerReferences"][0] | {"controller": True} == {
        **OWNER[0], "controller": True
    }  # fmt: skip
    assert [_text(v) for v in secret["data"].values()] == [KEY_A]
    vm = kube.objects["virtualmachines", "vm1"]
    assert vm["spec"]["template"]["spec"]["accessCredentials"] == [
        _ssh("vm1-ssh-key-abcde", "root")
    ]


def test_remove_key_drops_its_lines_and_emptied_keys() -> None:
    """Every line starting with the key goes; a value left empty loses its key; the other
    user's Secret is not touched."""
    kube = FakeKube(
        _vm(_ssh("keys", "root"), _ssh("other", "guest")),
        _secret("keys", {"a": KEY_A, "ab": f"{KEY_A}\n{KEY_B}\n"}),
        _secret("other", {"a": KEY_A}),
    )
    _run(kube, "remove-ssh-key", "-u", "root", "--value", KEY_A, "vm1")
    assert {k: _text(v) for k, v in kube.secret("keys")["data"].items()} == {"ab": KEY_B}
    assert kube.writes == ["update secrets/keys"]
    out = _run(kube, "remove-ssh-key", "-u", "nobody", "--value", KEY_A, "vm1")
    assert out == "No secrets associated with user nobody"
    with pytest.raises(CliError, match="secret other is not associated with user root"):
        _run(kube, "remove-ssh-key", "-u", "root", "--value", KEY_A, "--secret", "other", "vm1")


def test_set_password_puts_the_users_key() -> None:
    """The password Secret's key named by the user (replaced when there); two password
    Secrets need --secret; none is an error."""
    kube = FakeKube(_vm(_pw("pw")), _secret("pw", {"root": "old"}))
    out = _run(kube, "set-password", "-u", "root", "-p", "n3w", "vm1")
    assert out == 'Successfully set password in secret "pw"'
    assert _text(kube.secret("pw")["data"]["root"]) == "n3w"
    two = FakeKube(_vm(_pw("a"), _pw("b")), _secret("a", {}), _secret("b", {}))
    with pytest.raises(CliError, match="multiple secrets specified, use option --secret"):
        _run(two, "set-password", "-u", "root", "-p", "x", "vm1")
    _run(two, "set-password", "-u", "root", "-p", "x", "vm1", "--secret", "b")
    assert _text(two.secret("b")["data"]["root"]) == "x"
    gone = FakeKube(_vm(_pw("pw")))
    with pytest.raises(CliError, match='error getting secret "pw"'):
        _run(gone, "set-password", "-u", "root", "-p", "x", "vm1")
    none = FakeKube(_vm(_ssh("keys", "root")))
    with pytest.raises(CliError, match="no secrets assigned to UserPassword"):
        _run(none, "set-password", "-u", "root", "-p", "x", "vm1")
