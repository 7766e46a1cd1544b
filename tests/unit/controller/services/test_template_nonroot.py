"""Launcher pods run non-root by default (KubeVirt's qemu user 107), root only behind the
documented switch (`--launcher-as-root`)."""

from __future__ import annotations

from controller.config import Config, TemplateConfig
from controller.services.template import TemplateService
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from tests.unit.controller.builders import make_migration, make_vmi, vmi_dict


def test_the_compute_container_runs_as_the_qemu_user_without_capabilities() -> None:
    """runAsUser/runAsGroup 107, runAsNonRoot, no privilege escalation, every capability
    dropped, a read-only root filesystem, RuntimeDefault seccomp; the pod's volumes get
    fsGroup 107 and DHCP's port 67 is open to the unprivileged launcher by a namespaced
    sysctl."""
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi())
    (container,) = pod["spec"]["containers"]
    ctx = container["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsGroup"]) == (LAUNCHER_UID, LAUNCHER_GID) == (107, 107)
    assert ctx["runAsNonRoot"] is True and ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]} and "add" not in ctx["capabilities"]
    assert ctx["seccompProfile"]["type"] == "RuntimeDefault"
    assert ctx["readOnlyRootFilesystem"] is True
    security = pod["spec"]["securityContext"]
    assert security["fsGroup"] == LAUNCHER_GID == 107
    assert {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"} in security["sysctls"]


def test_migration_targets_run_non_root_too() -> None:
    """A target pod is made like the source's: a session daemon receives a session one's
    migration."""
    vmi = make_vmi()
    pod = TemplateService(TemplateConfig()).target_pod(vmi, make_migration(), source_node="n1")
    assert pod["spec"]["containers"][0]["securityContext"]["runAsUser"] == LAUNCHER_UID


def test_the_root_switch_leaves_the_pod_as_it_was() -> None:
    """`--launcher-as-root` (VIRT_CONTROLLER_LAUNCHER_AS_ROOT): no securityContext at all,
    libvirtd then runs in system mode."""
    config = Config.from_args(["--launcher-as-root=true"], environ={})
    assert config.template.launcher_as_root
    pod = TemplateService(config.template).launcher_pod(make_vmi())
    assert "securityContext" not in pod["spec"]
    assert "securityContext" not in pod["spec"]["containers"][0]
    assert not Config.from_args([], environ={}).template.launcher_as_root


def test_a_passt_bound_vmi_names_passts_profile_whatever_the_cr_says() -> None:
    """passt sandboxes itself in user namespaces, which RuntimeDefault and KubeVirt's profile
    refuse: such a pod and its compute container name `kubevirt/passt.json` (Localhost),
    with or without the KubeVirt CR naming a profile; it still runs as 107."""
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "passtBinding": {}}]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    expected = {"type": "Localhost", "localhostProfile": "kubevirt/passt.json"}
    for localhost in (None, "kubevirt/kubevirt.json"):
        config = TemplateConfig(seccomp_localhost_profile=localhost)
        pod = TemplateService(config).launcher_pod(make_vmi(raw=raw))
        ctx = pod["spec"]["containers"][0]["securityContext"]
        assert ctx["seccompProfile"] == expected == pod["spec"]["securityContext"]["seccompProfile"]
        assert ctx["runAsUser"] == LAUNCHER_UID
