"""The launcher pods' seccomp profile, as the KubeVirt CR chooses it (KubeVirt's design):

    spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile:
      localhostProfile: kubevirt/kubevirt.json   # a file under the kubelet's seccomp dir
      runtimeDefaultProfile: true                # or the runtime's default (not both)

The controller names the profile in launcher pods (`seccompProfile: {type: Localhost,
localhostProfile: …}`); RuntimeDefault when the CR names none. virt-handler writes
KubeVirt's own profile, `kubevirt/kubevirt.json`, into its node's kubelet seccomp dir when
the `KubevirtSeccompProfile` feature gate is on (KubeVirt's rule) or when the CR names that
profile (so a launcher pod never meets a missing file). Launcher pods of VMIs with a
`passtBinding` interface always name `kubevirt/passt.json` instead, whatever the CR says:
KubeVirt's profile plus the calls passt's own sandbox makes (user, mount, IPC, UTS, PID
namespaces, pivot_root), which virt-handler writes on every node, always. The profiles
themselves: handler/seccomp.py, handler/seccomp_passt.py. This module is the contract the
two daemons share.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from shared.model import FieldError
from shared.model.kubevirt import KubeVirtConfiguration

# KubeVirt's feature gate that makes virt-handler install its profile.
SECCOMP_GATE = "KubevirtSeccompProfile"
# The profile's name, relative to the kubelet's seccomp dir (<kubelet root>/seccomp).
KUBEVIRT_PROFILE = "kubevirt/kubevirt.json"
# passt VMIs' profile, beside it (always written, always named for them).
PASST_PROFILE = "kubevirt/passt.json"

_FIELD = "spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile"


def localhost_profile(c: KubeVirtConfiguration, errors: list[FieldError]) -> str | None:
    """The Localhost profile the CR names for launcher pods (None: RuntimeDefault); each
    problem appended to `errors`, naming its field."""
    seccomp = c.seccomp_configuration
    vmi = seccomp.virtual_machine_instance_profile if seccomp is not None else None
    custom = vmi.custom_profile if vmi is not None else None
    if custom is None or custom.localhost_profile is None:
        return None
    path = f"{_FIELD}.localhostProfile"
    if custom.runtime_default_profile:
        message = f"cannot be set when {_FIELD}.runtimeDefaultProfile is set"
        errors.append(FieldError(path=path, message=message, value=custom.localhost_profile))
        return None
    name = PurePosixPath(custom.localhost_profile)
    if not custom.localhost_profile or name.is_absolute() or ".." in name.parts:
        message = "must be a descending path relative to the kubelet's seccomp dir"
        errors.append(FieldError(path=path, message=message, value=custom.localhost_profile))
        return None
    return custom.localhost_profile


def pod_profile(localhost: str | None) -> dict[str, str]:
    """A pod's or container's `seccompProfile`: the Localhost one named, else RuntimeDefault."""
    if localhost is None:
        return {"type": "RuntimeDefault"}
    return {"type": "Localhost", "localhostProfile": localhost}
