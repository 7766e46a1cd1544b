"""spec.accessCredentials: SSH public keys and user passwords from Secrets, handed to the
guest by cloud-init (noCloud, configDrive: at start) or by the guest agent (qemuGuestAgent:
live, whenever the Secret changes). KubeVirt's kubevirt.io/v1 shape.

The launcher pod carries each qemuGuestAgent Secret (and each noCloud / configDrive one)
mounted at `PRIVATE_DIR/secret/<secretName>-access-cred` (KubeVirt's layout).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from shared.model._codec import Model


class Propagation(StrEnum):
    """How an access credential reaches the guest (the wire names of KubeVirt's fields)."""

    QEMU_GUEST_AGENT = "qemuGuestAgent"
    NO_CLOUD = "noCloud"
    CONFIG_DRIVE = "configDrive"


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessCredentialSecretSource(Model):
    """source.secret: the Secret in the VMI's namespace."""

    secret_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SSHPublicKeySource(Model):
    """sshPublicKey.source: every value of the Secret is one or more authorized_keys lines."""

    secret: AccessCredentialSecretSource | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QemuGuestAgentSSHPropagation(Model):
    """propagationMethod.qemuGuestAgent: the guest users given the Secret's keys.

    The keys are each user's whole authorized_keys: keys gone from the Secret are removed."""

    users: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NoCloudPropagation(Model):
    """propagationMethod.noCloud: the keys in the cloudInitNoCloud data (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigDrivePropagation(Model):
    """propagationMethod.configDrive: the keys in the config drive's metadata (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SSHPublicKeyPropagationMethod(Model):
    """sshPublicKey.propagationMethod: exactly one of the three."""

    no_cloud: NoCloudPropagation | None = None
    config_drive: ConfigDrivePropagation | None = None
    qemu_guest_agent: QemuGuestAgentSSHPropagation | None = None

    def methods(self) -> tuple[Propagation, ...]:
        """Every method set."""
        found = (
            (Propagation.NO_CLOUD, self.no_cloud),
            (Propagation.CONFIG_DRIVE, self.config_drive),
            (Propagation.QEMU_GUEST_AGENT, self.qemu_guest_agent),
        )
        return tuple(name for name, value in found if value is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class SSHPublicKeyAccessCredential(Model):
    """accessCredentials[].sshPublicKey."""

    source: SSHPublicKeySource = field(default_factory=SSHPublicKeySource)
    propagation_method: SSHPublicKeyPropagationMethod = field(
        default_factory=SSHPublicKeyPropagationMethod
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class UserPasswordSource(Model):
    """userPassword.source: each key of the Secret is a user name, its value the password."""

    secret: AccessCredentialSecretSource | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QemuGuestAgentUserPasswordPropagation(Model):
    """userPassword.propagationMethod.qemuGuestAgent (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserPasswordPropagationMethod(Model):
    """userPassword.propagationMethod: qemuGuestAgent, the only one."""

    qemu_guest_agent: QemuGuestAgentUserPasswordPropagation | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserPasswordAccessCredential(Model):
    """accessCredentials[].userPassword."""

    source: UserPasswordSource = field(default_factory=UserPasswordSource)
    propagation_method: UserPasswordPropagationMethod = field(
        default_factory=UserPasswordPropagationMethod
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessCredential(Model):
    """spec.accessCredentials[]: exactly one of sshPublicKey, userPassword."""

    ssh_public_key: SSHPublicKeyAccessCredential | None = None
    user_password: UserPasswordAccessCredential | None = None

    @property
    def secret_name(self) -> str | None:
        """The Secret it names, if any."""
        cred = self.ssh_public_key or self.user_password
        secret = cred.source.secret if cred is not None else None
        return secret.secret_name if secret is not None else None

    @property
    def propagation(self) -> Propagation | None:
        """How it reaches the guest (the first method set), None when none is."""
        if self.ssh_public_key is not None:
            methods = self.ssh_public_key.propagation_method.methods()
            return methods[0] if methods else None
        if self.user_password is not None:
            agent = self.user_password.propagation_method.qemu_guest_agent
            return Propagation.QEMU_GUEST_AGENT if agent is not None else None
        return None

    @property
    def agent_users(self) -> tuple[str, ...]:
        """The users of an sshPublicKey propagated by the guest agent (else none)."""
        ssh = self.ssh_public_key
        agent = ssh.propagation_method.qemu_guest_agent if ssh is not None else None
        return agent.users if agent is not None else ()


# Every model class of spec.accessCredentials (each types all of KubeVirt's keys).
CREDENTIAL_MODELS: tuple[type[Model], ...] = (
    AccessCredential,
    SSHPublicKeyAccessCredential,
    SSHPublicKeySource,
    AccessCredentialSecretSource,
    SSHPublicKeyPropagationMethod,
    QemuGuestAgentSSHPropagation,
    NoCloudPropagation,
    ConfigDrivePropagation,
    UserPasswordAccessCredential,
    UserPasswordSource,
    UserPasswordPropagationMethod,
    QemuGuestAgentUserPasswordPropagation,
)


def secret_names(creds: tuple[AccessCredential, ...]) -> tuple[str, ...]:
    """Every Secret the credentials name, once each, in order."""
    return tuple(dict.fromkeys(c.secret_name for c in creds if c.secret_name))
