"""spec.accessCredentials as the launcher reads them: the Secrets the pod mounted at
`PRIVATE_DIR/secret/<secretName>-access-cred` (KubeVirt's layout), turned into what each
propagation method needs.

- sshPublicKey: every value of the Secret holds authorized_keys lines; each non-empty line
  is one key (KubeVirt's reading).
- userPassword: each key of the Secret is a user name, its value that user's password.
The kubelet swaps a mounted Secret's files atomically through `..data`; names starting
with `..` are its bookkeeping and are skipped.

noCloud keys go into the NoCloud user data as `ssh_authorized_keys` (appended to a
`#cloud-config` document, merged into its own list if it has one); configDrive keys into
meta_data.json's `public_keys` (KubeVirt's habit for both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from shared.model.credentials import AccessCredential, Propagation

CLOUD_CONFIG = "#cloud-config"
AUTHORIZED_KEYS = "ssh_authorized_keys"
# Keys stay one line each (YAML would fold a long one: valid, but line-based readers and
# people grepping the user data see half a key).
_WIDE = 1 << 20

# Secret name → the directory it is mounted at.
SecretDir = Callable[[str], Path]


class CredentialError(Exception):
    """A credential's Secret could not be read (the message says which and why)."""


def _files(directory: Path) -> list[Path]:
    """The Secret's key files (sorted), refusing a Secret that is not mounted."""
    if not directory.is_dir():
        raise CredentialError(f"the Secret is not mounted at {directory}")
    try:
        names = list(directory.iterdir())
    except OSError as e:
        raise CredentialError(f"cannot list {directory}: {e.strerror}") from e
    return sorted(p for p in names if not p.name.startswith("..") and not p.is_dir())


def read_keys(directory: Path) -> tuple[str, ...]:
    """Every authorized_keys line of a mounted Secret, in key order."""
    out: list[str] = []
    for path in _files(directory):
        try:
            text = path.read_text()
        except OSError as e:
            raise CredentialError(f"cannot read {path}: {e.strerror}") from e
        out.extend(line.strip() for line in text.splitlines() if line.strip())
    return tuple(out)


def read_passwords(directory: Path) -> dict[str, str]:
    """User → password of a mounted Secret (empty values skipped)."""
    out: dict[str, str] = {}
    for path in _files(directory):
        try:
            password = path.read_text().strip()
        except OSError as e:
            raise CredentialError(f"cannot read {path}: {e.strerror}") from e
        if password:
            out[path.name] = password
    return out


def keys_for(
    creds: Iterable[AccessCredential], method: Propagation, secret_dir: SecretDir
) -> tuple[str, ...]:
    """The keys of every sshPublicKey propagated by `method` (noCloud or configDrive)."""
    keys: list[str] = []
    for cred in creds:
        if cred.ssh_public_key is None or cred.propagation != method or not cred.secret_name:
            continue
        keys.extend(read_keys(secret_dir(cred.secret_name)))
    return tuple(dict.fromkeys(keys))


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCredentials:
    """What the guest agent is to set: user → the full set of authorized keys, and user →
    password."""

    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    passwords: Mapping[str, str] = field(default_factory=dict)


def agent_credentials(creds: Iterable[AccessCredential], secret_dir: SecretDir) -> AgentCredentials:
    """The qemuGuestAgent credentials read from their Secrets: a user listed by several
    sshPublicKey credentials gets all their keys."""
    keys: dict[str, list[str]] = {}
    passwords: dict[str, str] = {}
    for cred in creds:
        if cred.propagation != Propagation.QEMU_GUEST_AGENT or not cred.secret_name:
            continue
        directory = secret_dir(cred.secret_name)
        if cred.ssh_public_key is not None:
            found = read_keys(directory)
            for user in cred.agent_users:
                keys.setdefault(user, []).extend(found)
        else:
            passwords.update(read_passwords(directory))
    return AgentCredentials(
        keys={u: tuple(dict.fromkeys(k)) for u, k in keys.items()}, passwords=passwords
    )


def with_authorized_keys(user_data: bytes, keys: tuple[str, ...]) -> bytes:
    """NoCloud user data carrying `keys` in `ssh_authorized_keys`: the user's own text kept
    and a list appended when it has none; merged into its list when it has one. User data
    that is not a #cloud-config document (a script, MIME) is returned unchanged."""
    if not keys:
        return user_data
    text = user_data.decode(errors="replace")
    if not text.strip():
        text = CLOUD_CONFIG + "\n"
    if not text.lstrip().startswith(CLOUD_CONFIG):
        return user_data
    import yaml  # noqa: PLC0415 (only a VMI with keys for cloud-init pays its import)

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return user_data
    doc = doc if isinstance(doc, dict) else {}
    own = doc.get(AUTHORIZED_KEYS)
    if own is None:
        block = yaml.safe_dump({AUTHORIZED_KEYS: list(keys)}, default_flow_style=False, width=_WIDE)
        return (text if text.endswith("\n") else text + "\n").encode() + block.encode()
    merged = [*(own if isinstance(own, list) else [own]), *keys]
    doc[AUTHORIZED_KEYS] = list(dict.fromkeys(str(k) for k in merged))
    body = yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, width=_WIDE)
    return f"{CLOUD_CONFIG}\n{body}".encode()


def public_keys(keys: tuple[str, ...]) -> dict[str, str]:
    """meta_data.json's `public_keys`: index → key (KubeVirt's shape)."""
    return {str(i): key for i, key in enumerate(keys)}
