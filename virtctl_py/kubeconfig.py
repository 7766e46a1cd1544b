"""kubectl's kubeconfig habits: every KUBECONFIG path merged, connection flags on top.

    config = merge(kubeconfig_paths(flag, environ, home))     # kubectl's merge rules
    config = override(config, Overrides(context=..., server=..., token=..., ...))

Merge (kubectl's loading rules): files in order, missing ones skipped; for clusters, users
and contexts the first file defining a name wins; the first `current-context` set wins.
Relative file references are resolved against the file that holds them.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from virtctl_py.errors import CliError, Exit

SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
FILE_KEYS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}
USER_CREDENTIALS = (
    "token", "tokenFile", "username", "password", "exec", "auth-provider",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrides:
    """kubectl's connection flags; None means not given."""

    context: str | None = None
    cluster: str | None = None
    user: str | None = None
    namespace: str | None = None
    server: str | None = None
    token: str | None = None
    insecure_skip_tls_verify: bool = False
    impersonate: str | None = None  # --as
    impersonate_groups: tuple[str, ...] = ()  # --as-group

    @property
    def connection_changed(self) -> bool:
        """Whether the kubeconfig as read cannot be used as is."""
        return any(
            (self.cluster, self.user, self.server, self.token, self.insecure_skip_tls_verify)
        )


def kubeconfig_paths(flag: str | None, environ: Mapping[str, str], home: Path) -> list[Path]:
    """--kubeconfig alone, else every $KUBECONFIG entry, else ~/.kube/config."""
    if flag:
        return [Path(flag)]
    entries = [e for e in environ.get("KUBECONFIG", "").split(os.pathsep) if e]
    if entries:
        return list(dict.fromkeys(Path(e) for e in entries))
    return [home / ".kube" / "config"]


def load(path: Path) -> dict[str, Any] | None:
    """One kubeconfig file, its relative paths made absolute; None when it does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CliError(f"cannot read kubeconfig {path}: {e}", code=Exit.USAGE) from e
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise CliError(f"kubeconfig {path} is not YAML: {e}", code=Exit.USAGE) from e
    if not isinstance(config, dict):
        raise CliError(f"kubeconfig {path} is not a mapping", code=Exit.USAGE)
    base = path.resolve().parent
    for section, inner in SECTIONS:
        for entry in config.get(section) or []:
            body = entry.get(inner) or {}
            for key in FILE_KEYS.get(inner, ()):
                value = body.get(key)
                if value and not os.path.isabs(value):
                    body[key] = str(base / value)
    return config


def merge(configs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """kubectl's merge: first definition of each name wins, first current-context wins."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for section, _ in SECTIONS:
        seen: dict[str, Any] = {}
        for config in configs:
            for entry in config.get(section) or []:
                seen.setdefault(str(entry.get("name")), copy.deepcopy(entry))
        merged[section] = list(seen.values())
    current = next((c["current-context"] for c in configs if c.get("current-context")), "")
    merged["current-context"] = current
    return merged


def _named(config: Mapping[str, Any], section: str, name: str) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            return dict(entry)
    raise CliError(f'{section[:-1]} "{name}" is not in the kubeconfig', code=Exit.USAGE)


def override(config: Mapping[str, Any], flags: Overrides) -> dict[str, Any]:
    """A kubeconfig whose current context is what the flags describe (kubectl's precedence:
    flags over the chosen context over the file's current-context)."""
    out = copy.deepcopy(dict(config))
    name = flags.context or out.get("current-context") or ""
    if not name and not flags.server:
        raise CliError("no context in the kubeconfig: pass --context or --server", code=Exit.USAGE)
    context = dict(_named(out, "contexts", name)["context"] or {}) if name else {}
    if flags.cluster:
        context["cluster"] = flags.cluster
    if flags.user:
        context["user"] = flags.user
    if flags.namespace:
        context["namespace"] = flags.namespace
    cluster = _pick(out, "clusters", "cluster", context.get("cluster"))
    user = _pick(out, "users", "user", context.get("user"))
    if flags.server:
        cluster["server"] = flags.server
    if flags.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
        cluster.pop("certificate-authority", None)
        cluster.pop("certificate-authority-data", None)
    if flags.token is not None:
        for key in USER_CREDENTIALS:
            user.pop(key, None)
        user["token"] = flags.token
    if not cluster.get("server"):
        raise CliError("no server: the context names no cluster; pass --server", code=Exit.USAGE)
    context.update(cluster="virtctl-py", user="virtctl-py")
    out["clusters"] = [{"name": "virtctl-py", "cluster": cluster}]
    out["users"] = [{"name": "virtctl-py", "user": user}]
    out["contexts"] = [{"name": "virtctl-py", "context": context}]
    out["current-context"] = "virtctl-py"
    return out


def _pick(config: Mapping[str, Any], section: str, inner: str, name: str | None) -> dict[str, Any]:
    return dict(_named(config, section, name)[inner] or {}) if name else {}


def namespace_of(config: Mapping[str, Any], context: str | None) -> str:
    """The namespace of `context` (else the current one), else "default"."""
    name = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if entry.get("name") == name:
            return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"


def impersonation(
    config: Mapping[str, Any], context: str | None, flags: Overrides
) -> tuple[tuple[str, str], ...]:
    """Impersonate-* headers: --as/--as-group, else the user entry's `as`/`as-groups`."""
    user: Mapping[str, Any] = {}
    name = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if entry.get("name") == name:
            user_name = (entry.get("context") or {}).get("user")
            for u in config.get("users") or []:
                if u.get("name") == user_name:
                    user = u.get("user") or {}
    who = flags.impersonate or user.get("as")
    groups = flags.impersonate_groups or tuple(user.get("as-groups") or ())
    if groups and not who:
        raise CliError("--as-group needs --as", code=Exit.USAGE)
    headers = [("Impersonate-User", str(who))] if who else []
    return tuple(headers + [("Impersonate-Group", str(g)) for g in groups])
