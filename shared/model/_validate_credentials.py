"""spec.accessCredentials: KubeVirt's rules (one credential type, one source, one
propagation method each; noCloud / configDrive need a volume of that kind; a guest-agent
key names its users) with KubeVirt's wording, plus the Secret's name as a DNS subdomain."""

from __future__ import annotations

from shared.model._validate_common import Errors, check_name
from shared.model.credentials import (
    AccessCredential,
    Propagation,
    SSHPublicKeyAccessCredential,
    UserPasswordAccessCredential,
)
from shared.model.vmi import VMISpec

# KubeVirt's arrayLenMax for spec lists.
MAX_ACCESS_CREDENTIALS = 256

_NEEDS_VOLUME = {
    Propagation.NO_CLOUD: ("noCloud", "cloud_init_no_cloud"),
    Propagation.CONFIG_DRIVE: ("configDrive", "cloud_init_config_drive"),
}


def validate_access_credentials(errs: Errors, path: str, spec: VMISpec) -> None:
    """Every problem of spec.accessCredentials, each at its field."""
    field_path = f"{path}.accessCredentials"
    creds = spec.access_credentials
    if len(creds) > MAX_ACCESS_CREDENTIALS:
        errs.add(
            field_path,
            f"{field_path} list exceeds the {MAX_ACCESS_CREDENTIALS} element limit in length",
            len(creds),
        )
        return
    for i, cred in enumerate(creds):
        _credential(errs, f"{field_path}[{i}]", cred, spec)


def _credential(errs: Errors, at: str, cred: AccessCredential, spec: VMISpec) -> None:
    kinds = (cred.ssh_public_key is not None) + (cred.user_password is not None)
    if kinds != 1:
        errs.add(at, f"{at} must have exactly one access credential type set")
    if cred.ssh_public_key is not None:
        _ssh(errs, at, cred.ssh_public_key, spec)
    if cred.user_password is not None:
        _password(errs, at, cred.user_password)


def _secret(errs: Errors, at: str, secret_name: str | None) -> None:
    check_name(errs, f"{at}.secret.secretName", secret_name, subdomain=True)


def _ssh(errs: Errors, at: str, ssh: SSHPublicKeyAccessCredential, spec: VMISpec) -> None:
    method_path = f"{at}.sshPublicKey.propagationMethod"
    source = ssh.source.secret
    if source is None:
        errs.add(f"{at}.sshPublicKey.source", f"{at} must have exactly one source set")
    else:
        _secret(errs, f"{at}.sshPublicKey.source", source.secret_name)
    methods = ssh.propagation_method.methods()
    for method in methods:
        need = _NEEDS_VOLUME.get(method)
        if need is None:
            continue
        wire, attr = need
        if not any(getattr(v, attr) is not None for v in spec.volumes):
            errs.add(
                method_path,
                f"{at} requires a {wire} volume to exist when the {wire} propagationMethod "
                "is in use.",
            )
    agent = ssh.propagation_method.qemu_guest_agent
    if agent is not None:
        users_path = f"{method_path}.qemuGuestAgent.users"
        if not agent.users:
            errs.add(users_path, f"{at} requires at least one user to be present in the users list")
        for j, user in enumerate(agent.users):
            if not user or "/" in user or any(c.isspace() for c in user):
                errs.add(f"{users_path}[{j}]", "must be a user name (no spaces or '/')", user)
    if len(methods) != 1:
        errs.add(method_path, f"{at} must have exactly one propagationMethod set")


def _password(errs: Errors, at: str, pw: UserPasswordAccessCredential) -> None:
    source = pw.source.secret
    if source is None:
        errs.add(f"{at}.userPassword.source", f"{at} must have exactly one source set")
    else:
        _secret(errs, f"{at}.userPassword.source", source.secret_name)
    if pw.propagation_method.qemu_guest_agent is None:
        errs.add(
            f"{at}.userPassword.propagationMethod",
            f"{at} must have exactly one propagationMethod set",
        )
