"""KubeVirt's launcher seccomp profile: chosen by the KubeVirt CR, written by virt-handler
into the kubelet's seccomp dir, named by the controller in launcher pods (RuntimeDefault
otherwise)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.kubevirt.live import template_config
from controller.services.template import TemplateService
from handler.seccomp import install, installer, profile
from shared.clusterconfig import ClusterConfig, resolve, validate_kubevirt
from shared.model.kubevirt import KubeVirt
from shared.seccompconfig import KUBEVIRT_PROFILE, PASST_PROFILE
from tests.unit.controller.builders import make_vmi

FIELD = "spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile"


def kv(custom: dict[str, Any], gates: tuple[str, ...] = ()) -> KubeVirt:
    configuration: dict[str, Any] = {
        "seccompConfiguration": {"virtualMachineInstanceProfile": {"customProfile": custom}}
    }
    if gates:
        configuration["developerConfiguration"] = {"featureGates": list(gates)}
    meta = {"name": "kubevirt", "namespace": "kubevirt"}
    return KubeVirt.from_dict({"metadata": meta, "spec": {"configuration": configuration}})


def _allowed(p: dict[str, Any]) -> set[str]:
    """Names allowed without any argument condition."""
    return {
        n for r in p["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" and not r["args"]
        for n in r["names"]
    }  # fmt: skip


def test_the_profile_is_the_runtime_default_shape_plus_userfaultfd() -> None:
    """Default EPERM; an allow-list with what programs need and userfaultfd (post-copy);
    no namespace, mount, bpf, keyring or module calls; clone only without namespace flags,
    clone3 ENOSYS; socket in every family but AF_ALG (38) and AF_VSOCK (40)."""
    p = profile()
    assert p["defaultAction"] == "SCMP_ACT_ERRNO" and "SCMP_ARCH_X86_64" in p["architectures"]
    allowed = _allowed(p)
    assert {"read", "openat", "mmap", "ioctl", "execve", "userfaultfd", "futex"} <= allowed
    forbidden = {"unshare", "mount", "setns", "bpf", "keyctl", "init_module", "reboot",
                 "clone", "clone3", "socket", "personality", "io_uring_setup", "pivot_root"}  # fmt: skip
    assert not forbidden & allowed
    (clone,) = [r for r in p["syscalls"] if r["names"] == ["clone"]]
    assert clone["args"] == [
        {"index": 0, "value": 0x7E020000, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
    ]
    (clone3,) = [r for r in p["syscalls"] if r["names"] == ["clone3"]]
    assert clone3["errnoRet"] == 38  # ENOSYS: libc falls back to clone
    sockets = [r["args"][0] for r in p["syscalls"] if r["names"] == ["socket"]]
    assert {"index": 0, "value": 38, "valueTwo": 0, "op": "SCMP_CMP_LT"} in sockets
    equal = {a["value"] for a in sockets if a["op"] == "SCMP_CMP_EQ"}
    assert equal == {39, 41, 42, 43, 44, 45}
    assert all(len(r.get("args", [])) <= 1 for r in p["syscalls"])  # runc ORs repeats


def test_install_writes_the_file_once_0600_in_a_0700_dir(tmp_path: Path) -> None:
    """`<dir>/kubevirt/kubevirt.json`, the profile's JSON; a second install leaves the same
    bytes alone and puts back a loosened mode."""
    assert install(tmp_path) is True
    target = tmp_path / KUBEVIRT_PROFILE
    assert json.loads(target.read_text()) == profile()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    target.chmod(0o644)
    assert install(tmp_path) is False
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    target.write_text("{}")
    assert install(tmp_path) is True and json.loads(target.read_text()) == profile()
    assert [p.name for p in target.parent.iterdir()] == ["kubevirt.json"]  # no temp left


@pytest.mark.parametrize(
    ("config", "installed"),
    [
        (ClusterConfig(), False),
        (ClusterConfig(feature_gates=frozenset({"KubevirtSeccompProfile"})), True),
        (ClusterConfig(seccomp_localhost_profile=KUBEVIRT_PROFILE), True),
        (ClusterConfig(seccomp_localhost_profile="other/p.json"), False),
    ],
)
def test_the_handler_installs_when_the_gate_or_the_cr_asks(
    tmp_path: Path, config: ClusterConfig, installed: bool
) -> None:
    """KubeVirt's KubevirtSeccompProfile gate, or the CR naming kubevirt/kubevirt.json (so
    a launcher pod never meets a missing file); a profile of the operator's own is theirs."""
    installer(tmp_path)(config)
    assert (tmp_path / KUBEVIRT_PROFILE).exists() is installed
    assert not (tmp_path / PASST_PROFILE).exists()  # passt's: install_always, at start
    installer(None)(config)  # no kubelet seccomp dir mounted: nothing, no error


def test_the_cr_chooses_the_launchers_profile() -> None:
    """customProfile.localhostProfile → Localhost on the pod and the compute container;
    runtimeDefaultProfile or nothing → RuntimeDefault."""
    vmi = make_vmi()
    cases: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"localhostProfile": KUBEVIRT_PROFILE},
         {"type": "Localhost", "localhostProfile": KUBEVIRT_PROFILE}),
        ({"runtimeDefaultProfile": True}, {"type": "RuntimeDefault"}),
        ({}, {"type": "RuntimeDefault"}),
    ]  # fmt: skip
    for custom, expected in cases:
        cluster = resolve(ClusterConfig(), kv(custom))
        template = template_config(TemplateConfig(), cluster)
        pod = TemplateService(template).launcher_pod(vmi)
        assert pod["spec"]["securityContext"]["seccompProfile"] == expected
        assert pod["spec"]["containers"][0]["securityContext"]["seccompProfile"] == expected


@pytest.mark.parametrize(
    ("custom", "message"),
    [
        ({"localhostProfile": KUBEVIRT_PROFILE, "runtimeDefaultProfile": True}, "cannot be set"),
        ({"localhostProfile": "/etc/p.json"}, "descending path"),
        ({"localhostProfile": "../p.json"}, "descending path"),
        ({"localhostProfile": ""}, "descending path"),
    ],
)
def test_a_bad_custom_profile_is_named(custom: dict[str, Any], message: str) -> None:
    """Both kinds at once (KubeVirt's rule) or a path outside the kubelet's seccomp dir:
    the field is named (admission refuses the CR)."""
    (error,) = validate_kubevirt(kv(custom))
    assert error.path == f"{FIELD}.localhostProfile" and message in error.message
