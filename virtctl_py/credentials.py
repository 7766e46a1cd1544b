"""`credentials add-ssh-key | remove-ssh-key | set-password`: KubeVirt's virtctl credentials.

    virtctl-py credentials add-ssh-key -u USER (-f FILE | --value KEY) VM
                          [--create-secret | --update-secret] [--secret S] [--force]
    virtctl-py credentials remove-ssh-key -u USER (-f FILE | --value KEY) VM [--secret S] [--force]
    virtctl-py credentials set-password -u USER -p PASSWORD VM [--secret S] [--force]

They edit the Secrets the VM's spec.template.spec.accessCredentials name (guest-agent
propagation), as KubeVirt's do: a key is added as a new Secret key `ssh-key-XXXXXX`,
removed by dropping every line that starts with it, a password is the Secret key named by
the user. A Secret that no ownerReference ties to the VM is only changed with --force.
add-ssh-key with no Secret for the user (or --create-secret) creates one owned by the VM
(`<vm>-ssh-key-…`) and appends a qemuGuestAgent credential to the VM; that is refused
while the VM runs unless --force (it takes effect at the next start). The launcher applies
Secret changes to a running guest (launcher/credsync.py).
"""

from __future__ import annotations

import argparse
import base64
import secrets
from collections.abc import Mapping
from typing import Any

from shared.kube.errors import ApiError, Conflict, NotFound
from shared.kube.resources import SECRETS, VMIS, VMS
from virtctl_py.errors import CliError
from virtctl_py.rest import JSON_PATCH, Rest
from virtctl_py.session import Target

CREDENTIALS_PATH = "/spec/template/spec/accessCredentials"
# k8s.io/apimachinery's rand.String alphabet (no vowels, no look-alikes).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
UPDATE_RETRIES = 5


def random_suffix(prefix: str) -> str:
    """`prefix` and six random characters (KubeVirt's RandomWithPrefix)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(6))


def _template_creds(vm: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("accessCredentials") or [])


def _secret_name(cred: Mapping[str, Any]) -> str:
    return str(((cred.get("source") or {}).get("secret") or {}).get("secretName") or "")


def ssh_secrets_for_user(vm: Mapping[str, Any], user: str) -> list[str]:
    """The Secrets of the VM's guest-agent sshPublicKey credentials listing `user`."""
    out = []
    for cred in _template_creds(vm):
        ssh = cred.get("sshPublicKey") or {}
        agent = (ssh.get("propagationMethod") or {}).get("qemuGuestAgent")
        if _secret_name(ssh) and agent is not None and user in (agent.get("users") or []):
            out.append(_secret_name(ssh))
    return out


def password_secrets(vm: Mapping[str, Any]) -> list[str]:
    """The Secrets of the VM's guest-agent userPassword credentials."""
    out = []
    for cred in _template_creds(vm):
        pw = cred.get("userPassword") or {}
        agent = (pw.get("propagationMethod") or {}).get("qemuGuestAgent")
        if _secret_name(pw) and agent is not None:
            out.append(_secret_name(pw))
    return out


def pick_secret(flag: str | None, found: list[str]) -> str:
    """--secret when it is one of `found`; else the only one (KubeVirt's
    FindSecretOrGetFirst)."""
    if not flag:
        if len(found) > 1:
            raise CliError(
                "multiple secrets specified, use option --secret to specify which secret to modify"
            )
        return found[0]
    if flag in found:
        return flag
    raise CliError(f"secret {flag} was not assigned")


def owned_by(secret: Mapping[str, Any], vm: Mapping[str, Any]) -> bool:
    """An ownerReference of the Secret points at this VM (kind, name and uid)."""
    meta = vm.get("metadata") or {}
    for ref in (secret.get("metadata") or {}).get("ownerReferences") or []:
        if (ref.get("kind"), ref.get("name"), ref.get("uid")) == (
            "VirtualMachine",
            meta.get("name"),
            meta.get("uid"),
        ):
            return True
    return False


def _check_owner(secret: Mapping[str, Any], vm: Mapping[str, Any], *, force: bool) -> None:
    if not force and not owned_by(secret, vm):
        name = (secret.get("metadata") or {}).get("name")
        vm_name = (vm.get("metadata") or {}).get("name")
        raise CliError(f"secret {name} does not have an owner reference pointing to VM {vm_name}")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _lines(data: Mapping[str, str]) -> dict[str, list[str]]:
    return {k: base64.b64decode(v).decode(errors="replace").split("\n") for k, v in data.items()}


def _line_has_key(line: str, key: str) -> bool:
    return line.strip().startswith(key)


def secret_contains_key(data: Mapping[str, str], key: str) -> bool:
    """Some line of some value starts with `key` (data as the API gives it: base64)."""
    return any(_line_has_key(line, key) for lines in _lines(data).values() for line in lines)


def without_key(data: Mapping[str, str], key: str) -> dict[str, str]:
    """The Secret's data with every line starting with `key` (and every blank line)
    dropped; a value left empty loses its key."""
    out = {}
    for name, lines in _lines(data).items():
        kept = [line for line in lines if line.strip() and not _line_has_key(line, key)]
        if kept:
            out[name] = _b64("\n".join(kept))
    return out


def add_data_patch(key: str, value: str, *, with_data: bool) -> list[dict[str, Any]]:
    """A JSON patch adding `key` to the Secret's data (creating .data when it has none)."""
    ops: list[dict[str, Any]] = []
    if with_data:
        ops += [{"op": "test", "path": "/data", "value": None},
                {"op": "add", "path": "/data", "value": {}}]  # fmt: skip
    return [*ops, {"op": "add", "path": f"/data/{key}", "value": _b64(value)}]


def new_key_secret(vm: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A Secret holding the key, controlled by the VM (KubeVirt's add-ssh-key)."""
    meta = vm.get("metadata") or {}
    owner = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "generateName": f"{meta.get('name')}-ssh-key-",
            "namespace": meta.get("namespace"),
            "ownerReferences": [owner],
        },
        "data": {random_suffix("ssh-key-"): _b64(key)},
    }


def add_credential_patch(secret: str, user: str, *, with_list: bool) -> list[dict[str, Any]]:
    """A JSON patch appending a guest-agent sshPublicKey credential to the VM's template
    (creating the list when it has none)."""
    cred = {
        "sshPublicKey": {
            "source": {"secret": {"secretName": secret}},
            "propagationMethod": {"qemuGuestAgent": {"users": [user]}},
        }
    }
    ops: list[dict[str, Any]] = []
    if with_list:
        ops += [{"op": "test", "path": CREDENTIALS_PATH, "value": None},
                {"op": "add", "path": CREDENTIALS_PATH, "value": []}]  # fmt: skip
    return [*ops, {"op": "add", "path": f"{CREDENTIALS_PATH}/-", "value": cred}]


def read_key(args: argparse.Namespace) -> str:
    """The key from --value or --file (read before the cluster is asked anything)."""
    if args.value:
        return str(args.value).strip()
    if not args.file:
        raise CliError("one of --file, or --value must be specified")
    try:
        with open(args.file, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as e:
        raise CliError(f"error getting ssh key: {e}") from e


def credentials(kube: Rest, target: Target, args: argparse.Namespace) -> str:
    """The `credentials` verb."""
    ns = target.namespace
    if args.action == "set-password":
        vm = kube.get(VMS, args.name, namespace=ns)
        return set_password(kube, vm, args)
    key = read_key(args)
    vm = kube.get(VMS, args.name, namespace=ns)
    if args.action == "add-ssh-key":
        return add_key(kube, vm, key, args)
    return remove_key(kube, vm, key, args)


def _get_secret(kube: Rest, ns: str, name: str) -> dict[str, Any]:
    """The Secret; a missing one named as KubeVirt's virtctl names it."""
    try:
        return kube.get(SECRETS, name, namespace=ns)
    except NotFound as e:
        raise CliError(f'error getting secret "{name}": {e}') from e


def _patch_data(kube: Rest, ns: str, name: str, key: str, value: str) -> None:
    """Add `key` to the Secret's data; a second patch creating .data if the first failed."""
    try:
        patch = add_data_patch(key, value, with_data=False)
        kube.patch(SECRETS, name, patch, namespace=ns, patch_type=JSON_PATCH)
    except ApiError:
        patch = add_data_patch(key, value, with_data=True)
        kube.patch(SECRETS, name, patch, namespace=ns, patch_type=JSON_PATCH)


def add_key(kube: Rest, vm: Mapping[str, Any], key: str, args: argparse.Namespace) -> str:
    """add-ssh-key: into the user's Secret, or a new Secret and credential."""
    ns = vm["metadata"]["namespace"]
    found = ssh_secrets_for_user(vm, args.guest_user)
    if args.create_secret or (not args.update_secret and not found):
        return _add_with_new_secret(kube, vm, key, args)
    if not found:
        raise CliError(f"no secrets specified for user: {args.guest_user}")
    secret_name = pick_secret(args.secret, found)
    secret = _get_secret(kube, ns, secret_name)
    if secret_contains_key(secret.get("data") or {}, key):
        return f'Secret "{secret_name}" already contains this SSH key.'
    _check_owner(secret, vm, force=args.force)
    _patch_data(kube, ns, secret_name, random_suffix("ssh-key-"), key)
    return f'Successfully added the key to secret "{secret_name}"'


def _add_with_new_secret(
    kube: Rest, vm: Mapping[str, Any], key: str, args: argparse.Namespace
) -> str:
    ns, name = vm["metadata"]["namespace"], vm["metadata"]["name"]
    if not args.force:
        try:
            kube.get(VMIS, name, namespace=ns)
        except NotFound:
            pass
        else:
            raise CliError(
                f"virtual machine {name} is running. Use --force flag to update a running VM, "
                "it will take effect after restart"
            )
    created = kube.create(SECRETS, new_key_secret(vm, key), namespace=ns)
    secret = created["metadata"]["name"]
    try:
        patch = add_credential_patch(secret, args.guest_user, with_list=False)
        kube.patch(VMS, name, patch, namespace=ns, patch_type=JSON_PATCH)
    except ApiError:
        patch = add_credential_patch(secret, args.guest_user, with_list=True)
        kube.patch(VMS, name, patch, namespace=ns, patch_type=JSON_PATCH)
    return ""


def remove_key(kube: Rest, vm: Mapping[str, Any], key: str, args: argparse.Namespace) -> str:
    """remove-ssh-key: the key's lines out of every Secret of the user (or --secret)."""
    found = ssh_secrets_for_user(vm, args.guest_user)
    if not found:
        return f"No secrets associated with user {args.guest_user}"
    if args.secret and args.secret not in found:
        raise CliError(f"secret {args.secret} is not associated with user {args.guest_user}")
    for secret_name in [args.secret] if args.secret else found:
        _remove_from(kube, vm, secret_name, key, force=args.force)
    return ""


def _remove_from(
    kube: Rest, vm: Mapping[str, Any], secret_name: str, key: str, *, force: bool
) -> None:
    """Read, drop the key, update; again on a write conflict (KubeVirt's retry)."""
    ns = vm["metadata"]["namespace"]
    for attempt in range(UPDATE_RETRIES):
        try:
            secret = kube.get(SECRETS, secret_name, namespace=ns)
        except NotFound:
            return
        _check_owner(secret, vm, force=force)
        secret["data"] = without_key(secret.get("data") or {}, key)
        try:
            kube.update(SECRETS, secret)
            return
        except NotFound:
            return
        except Conflict:
            if attempt == UPDATE_RETRIES - 1:
                raise


def set_password(kube: Rest, vm: Mapping[str, Any], args: argparse.Namespace) -> str:
    """set-password: the user's key of the VM's password Secret."""
    ns = vm["metadata"]["namespace"]
    found = password_secrets(vm)
    if not found:
        raise CliError("no secrets assigned to UserPassword AccessCredentials")
    secret_name = pick_secret(args.secret, found)
    if not args.force:
        _check_owner(_get_secret(kube, ns, secret_name), vm, force=False)
    _patch_data(kube, ns, secret_name, args.guest_user, args.password)
    return f'Successfully set password in secret "{secret_name}"'
