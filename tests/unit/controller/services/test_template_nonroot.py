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


def test_a_passt_bound_vmi_gets_no_seccomp_profile() -> None:
    """passt sandboxes itself in user namespaces, which RuntimeDefault refuses without
    CAP_SYS_ADMIN: such a pod names no profile; it still runs as 107."""
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "passtBinding": {}}]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi(raw=raw))
    ctx = pod["spec"]["containers"][0]["securityContext"]
    assert "seccompProfile" not in ctx and "seccompProfile" not in pod["spec"]["securityContext"]
    assert ctx["runAsUser"] == LAUNCHER_UID


def test_a_host_disk_vmi_runs_non_root_too() -> None:
    """hostDisk images are handed to 107 by virt-handler (handler/podowner.py), so such a
    VMI's launcher is not root either."""
    raw = vmi_dict()
    raw["spec"]["volumes"] = [
        {"name": "host", "hostDisk": {"path": "/var/data/disk.img", "type": "DiskOrCreate",
                                      "capacity": "1Gi"}},
    ]  # fmt: skip
    raw["spec"]["domain"]["devices"]["disks"] = [{"name": "host", "disk": {"bus": "virtio"}}]
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi(raw=raw))
    assert pod["spec"]["containers"][0]["securityContext"]["runAsUser"] == LAUNCHER_UID
    assert pod["spec"]["securityContext"]["fsGroup"] == LAUNCHER_GID
