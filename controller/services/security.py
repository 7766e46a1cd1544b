"""A launcher pod's security context: the non-root compute container (uid 107, no
capabilities, read-only root filesystem), its seccomp profile (passt VMIs: passt's own,
`kubevirt/passt.json`), and what passt needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from shared.model import VirtualMachineInstance
from shared.seccompconfig import PASST_PROFILE, pod_profile

RUNTIME_DEFAULT = pod_profile(None)


def passt(vmi: VirtualMachineInstance) -> bool:
    """An interface bound by passt, which sandboxes itself in user namespaces: the runtime's
    default seccomp profile (and KubeVirt's, its shape) refuses unshare(CLONE_NEWUSER)
    without CAP_SYS_ADMIN."""
    return any(i.uses_passt() for i in vmi.spec.domain.devices.interfaces)


def launcher_seccomp(vmi: VirtualMachineInstance, localhost: str | None) -> dict[str, str]:
    """The launcher's seccompProfile: passt VMIs always `kubevirt/passt.json` (KubeVirt's
    profile plus passt's sandbox calls, which virt-handler writes on every node), whatever
    the KubeVirt CR names; others the CR's Localhost profile, else RuntimeDefault."""
    return pod_profile(PASST_PROFILE if passt(vmi) else localhost)


def pod_security_context(*, seccomp: Mapping[str, str] = RUNTIME_DEFAULT) -> dict[str, Any]:
    """A non-root launcher pod's: volumes group-owned by the qemu group (the kubelet's
    fsGroup), and DHCP's port 67 open to the unprivileged launcher (a namespaced, safe
    sysctl) so its responder binds it without capabilities; `seccomp`: its seccompProfile."""
    return {
        "fsGroup": LAUNCHER_GID,
        "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
        "seccompProfile": dict(seccomp),
    }


def compute_security_context(*, seccomp: Mapping[str, str] = RUNTIME_DEFAULT) -> dict[str, Any]:
    """The compute container as the qemu user with no capabilities (KubeVirt's non-root
    launcher): libvirtd in session mode and QEMU need none, as virt-handler wires the
    pod's network and hands the container's device nodes to the user. The root filesystem
    is read-only: everything the launcher, libvirtd and QEMU write is under the pod's
    emptyDirs (`private`, `sockets`; docs/nonroot.md). `seccomp`: its seccompProfile (the
    pod's, launcher_seccomp)."""
    return {
        "runAsUser": LAUNCHER_UID,
        "runAsGroup": LAUNCHER_GID,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": dict(seccomp),
    }


def allow_passt(spec: dict[str, Any]) -> None:
    """passt (the launcher's, dropping to an unprivileged user) binds the forwarded ports,
    low ones too, and answers the guest's ICMP echo with ping sockets: both allowed in the
    pod's network namespace by sysctls Kubernetes deems safe (KubeVirt sets the same)."""
    security = spec.setdefault("securityContext", {})
    sysctls = security.setdefault("sysctls", [])
    for name, value in (
        ("net.ipv4.ping_group_range", "0 2147483647"),
        ("net.ipv4.ip_unprivileged_port_start", "0"),
    ):
        if all(s["name"] != name for s in sysctls):  # the non-root context may have set it
            sysctls.append({"name": name, "value": value})
