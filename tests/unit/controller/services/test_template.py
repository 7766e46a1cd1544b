"""The pod template service: a VMI in, the launcher Pod the handler and launcher expect out."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.errors import SyncError
from controller.services.overhead import (
    MIB,
    OverheadConfig,
    kubevirt_overhead_bytes,
    memory_overhead_bytes,
)
from controller.services.template import (
    SUFFIX_ALPHABET,
    TemplateService,
    pod_name,
    pod_suffix,
)
from launcher.config import Config as LauncherConfig
from tests.unit.controller.builders import MIG_UID, VMI_UID, make_migration, make_vmi, vmi_dict

IMAGE = "registry.local/kubevirt-py/virt-launcher:dev"


def parse_launcher_args(args: list[str]) -> dict[str, Any]:
    """The launcher's own parser applied to the rendered args (the real contract)."""
    cfg = LauncherConfig.from_args(args)
    return {
        k: str(v) if v is not None and not isinstance(v, int) else v
        for k, v in vars_of(cfg).items()
    }


def vars_of(cfg: LauncherConfig) -> dict[str, Any]:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def render(raw: dict[str, Any] | None = None, **cfg: Any) -> dict[str, Any]:
    return TemplateService(TemplateConfig(**cfg)).launcher_pod(make_vmi(raw=raw))


def compute(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "compute"
    return dict(container)


def test_name_is_prefix_vmi_and_five_stable_chars() -> None:
    """virt-launcher-<vmi>-<5 chars>; the chars come from the UID, so a retried create collides."""
    pod = render()
    name = pod["metadata"]["name"]
    assert name.startswith("virt-launcher-vm1-")
    suffix = name.removeprefix("virt-launcher-vm1-")
    assert len(suffix) == 5 and set(suffix) <= set(SUFFIX_ALPHABET)
    assert render()["metadata"]["name"] == name
    assert pod_suffix("other-uid") != suffix


def test_a_pod_replacing_refused_ones_has_a_name_of_its_own_per_attempt() -> None:
    """After n kubelet refusals the next pod's name differs from every earlier one and is
    stable for its attempt (a retried create still collides)."""
    service = TemplateService(TemplateConfig())
    vmi = make_vmi()
    names = [service.launcher_pod(vmi, attempt=n)["metadata"]["name"] for n in range(5)]
    assert len(set(names)) == 5 and names[0] == render()["metadata"]["name"]
    assert service.launcher_pod(vmi, attempt=3)["metadata"]["name"] == names[3]


def test_long_vmi_names_are_cut_to_a_valid_pod_name() -> None:
    """A 253-char VMI name still yields a ≤253-char pod name ending in the suffix."""
    name = pod_name("a" * 253, VMI_UID)
    assert len(name) <= 253
    assert name.endswith("-" + pod_suffix(VMI_UID))


def test_owner_reference_points_at_the_vmi_as_controller() -> None:
    """The pod is owned by its VMI (controller=true), so garbage collection follows it."""
    (ref,) = render()["metadata"]["ownerReferences"]
    assert ref == {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "name": "vm1",
        "uid": VMI_UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_labels_carry_app_created_by_and_the_vmis_labels() -> None:
    """kubevirt.io=virt-launcher, created-by=<uid>, plus the VMI's labels; no VM label unless owned."""
    labels = render()["metadata"]["labels"]
    assert labels == {"app": "x", "kubevirt.io": "virt-launcher", "kubevirt.io/created-by": VMI_UID}


def test_vm_label_when_a_vm_owns_the_vmi() -> None:
    """kubevirt.io/vm=<vm name> when the VMI's controller is a VirtualMachine."""
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi(owner_vm=True))
    assert pod["metadata"]["labels"]["kubevirt.io/vm"] == "vm1"


def test_node_name_label_of_the_vmi_is_not_copied() -> None:
    """The VMI's kubevirt.io/nodeName label is the handler's selector, not the pod's."""
    raw = vmi_dict()
    raw["metadata"]["labels"]["kubevirt.io/nodeName"] = "node01"
    assert "kubevirt.io/nodeName" not in render(raw)["metadata"]["labels"]


def test_memory_request_is_guest_plus_our_overhead() -> None:
    """128Mi guest, 1 vCPU, emulated: 128 + 48 + 64 + 32 + 8 + 1 MiB."""
    requests = compute(render())["resources"]["requests"]
    assert int(requests["memory"]) == (128 + 153) * MIB


def test_overhead_formula_parts() -> None:
    """KVM drops the TCG cache; vCPUs add 8 MiB each; page tables guest/512 rounded up."""
    cfg = OverheadConfig()
    gib = 1024 * MIB
    emulated = memory_overhead_bytes(guest_bytes=gib, vcpus=2, emulated=True, config=cfg)
    kvm = memory_overhead_bytes(guest_bytes=gib, vcpus=2, emulated=False, config=cfg)
    assert emulated - kvm == 32 * MIB
    assert kvm == (48 + 64 + 16 + 2) * MIB


def test_our_overhead_is_below_kubevirts() -> None:
    """For the measured guest (128 MiB, 1 vCPU) we ask ~100 MiB less than KubeVirt would."""
    ours = memory_overhead_bytes(
        guest_bytes=128 * MIB, vcpus=1, emulated=True, config=OverheadConfig()
    )
    theirs = kubevirt_overhead_bytes(guest_bytes=128 * MIB, vcpus=1)
    assert ours < theirs - 90 * MIB


def test_cpu_request_defaults_to_100m_per_vcpu() -> None:
    """No requests.cpu: 100m per vCPU (KubeVirt's allocation ratio of 10)."""
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = {"sockets": 1, "cores": 2, "threads": 2}
    assert compute(render(raw))["resources"]["requests"]["cpu"] == "400m"


def test_explicit_requests_and_limits_are_honoured() -> None:
    """requests.cpu is kept; limits.memory gets the same overhead as the request."""
    raw = vmi_dict()
    raw["spec"]["domain"]["resources"] = {
        "requests": {"cpu": "1500m", "memory": "256Mi"},
        "limits": {"memory": "512Mi", "cpu": "2"},
    }
    res = compute(render(raw))["resources"]
    assert res["requests"]["cpu"] == "1500m"
    assert int(res["requests"]["memory"]) == (256 + 153) * MIB
    assert int(res["limits"]["memory"]) == (512 + 153) * MIB
    assert res["limits"]["cpu"] == "2"


@pytest.mark.parametrize(
    ("use_emulation", "kvm", "virt_type"),
    [
        pytest.param(True, None, "auto", id="emulation-allowed"),
        pytest.param(False, "1", "kvm", id="kvm-required"),
    ],
)
def test_kvm_device_only_when_emulation_is_off(
    use_emulation: bool, kvm: str | None, virt_type: str
) -> None:
    """useEmulation off: request devices.kubevirt.io/kvm and tell the launcher kvm."""
    c = compute(render(use_emulation=use_emulation))
    for section in ("requests", "limits"):
        assert c["resources"][section].get("devices.kubevirt.io/kvm") == kvm
        assert c["resources"][section]["devices.kubevirt.io/tun"] == "1"
    assert parse_launcher_args(c["args"])["virt_type"] == virt_type


def test_grace_periods_add_15_and_30_seconds() -> None:
    """Launcher grace = VMI grace + 15 s; pod grace = VMI grace + 30 s (30 s default)."""
    pod = render()
    assert pod["spec"]["terminationGracePeriodSeconds"] == 60
    assert parse_launcher_args(compute(pod)["args"])["grace_period_seconds"] == 45
    raw = vmi_dict()
    raw["spec"]["terminationGracePeriodSeconds"] = 0
    pod = render(raw)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30
    assert parse_launcher_args(compute(pod)["args"])["grace_period_seconds"] == 15


def test_node_selector_merges_schedulable_with_the_vmis() -> None:
    """kubevirt.io/schedulable=true always wins over the VMI's own selector."""
    raw = vmi_dict()
    raw["spec"]["nodeSelector"] = {"disk": "ssd", "kubevirt.io/schedulable": "false"}
    assert render(raw)["spec"]["nodeSelector"] == {"disk": "ssd", "kubevirt.io/schedulable": "true"}


def test_pod_basics() -> None:
    """restartPolicy Never, no service-account token, the configured image."""
    pod = render()
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert compute(pod)["image"] == IMAGE
    assert "command" not in compute(pod)


def test_volumes_and_mounts_form_the_socket_contract() -> None:
    """sockets and private emptyDirs, the notify dir as a hostPath at the same path inside,
    each mounted where the launcher's arguments point."""
    pod = render(notify_host_dir="/run/kvt/notify")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["sockets"] == {"name": "sockets", "emptyDir": {}}
    assert volumes["private"] == {"name": "private", "emptyDir": {}}
    assert volumes["notify"]["hostPath"] == {"path": "/run/kvt/notify", "type": "DirectoryOrCreate"}
    mounts = {m["name"]: m["mountPath"] for m in compute(pod)["volumeMounts"]}
    args = parse_launcher_args(compute(pod)["args"])
    assert args["sockets_dir"] == mounts["sockets"]
    assert args["private_dir"] == mounts["private"]
    assert mounts["notify"] == "/run/kvt/notify"  # the same path as on the host
    assert args["notify_socket"] == "/run/kvt/notify/$(NODE_NAME)/domain-notify.sock"
    env = {e["name"]: e for e in compute(pod)["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_launcher_args_parse_with_the_launchers_own_parser() -> None:
    """Every argument the template emits is one the launcher accepts."""
    c = compute(render(kvm_probe_file="/srv/kvm-probe", capabilities_seed="/srv/c"))
    args = parse_launcher_args(c["args"])
    assert args["name"] == "vm1" and args["namespace"] == "ns" and args["uid"] == VMI_UID
    assert args["kvm_probe_file"] == "/srv/kvm-probe"
    assert str(args["capabilities_seed"]) == "/srv/c"


def test_custom_command_is_set_when_configured() -> None:
    """A configured launcher command replaces the image entrypoint; args stay."""
    c = compute(render(launcher_command=("python", "-m", "launcher")))
    assert c["command"] == ["python", "-m", "launcher"]
    assert "--name" in c["args"]


def test_target_pod_is_labelled_and_kept_off_the_source_node() -> None:
    """Migration target: same template, migrationJobUID label, node anti-affinity, own name."""
    svc = TemplateService(TemplateConfig())
    vmi = make_vmi()
    target = svc.target_pod(vmi, make_migration(), source_node="node01")
    launcher = svc.launcher_pod(vmi)
    assert target["metadata"]["labels"]["kubevirt.io/migrationJobUID"] == MIG_UID
    assert target["metadata"]["name"] != launcher["metadata"]["name"]
    terms = target["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node01"]}]}
    ]
    assert target["spec"]["containers"] == launcher["spec"]["containers"]


def test_a_vmi_without_uid_cannot_be_rendered() -> None:
    """No UID yet (never from the API server): a SyncError, not a half-labelled pod."""
    vmi = make_vmi()
    vmi = dataclasses.replace(vmi, metadata=dataclasses.replace(vmi.metadata, uid=None))
    with pytest.raises(SyncError):
        TemplateService(TemplateConfig()).launcher_pod(vmi)


def test_default_notify_socket_is_where_the_handler_listens() -> None:
    """/var/run/kubevirt-py/nodes/<node>/domain-notify.sock, as handler/config.py has it."""
    args = parse_launcher_args(compute(render())["args"])
    assert args["notify_socket"] == "/var/run/kubevirt-py/nodes/$(NODE_NAME)/domain-notify.sock"


def test_the_nodes_capability_cache_is_mounted_read_only_when_asked() -> None:
    """--node-capabilities-seed: a DirectoryOrCreate hostPath at podlayout's path, mounted
    read-only at the same path and named to the launcher; a shared dir named instead
    (process-mode clusters) wins, and by default there is neither."""
    pod = render(node_capabilities_seed=True)
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "qemu-capabilities"]
    assert volume["hostPath"] == {
        "path": "/var/cache/kubevirt-py/qemu-capabilities",
        "type": "DirectoryOrCreate",
    }
    mount = next(m for m in compute(pod)["volumeMounts"] if m["name"] == "qemu-capabilities")
    assert mount["readOnly"] is True and mount["mountPath"] == volume["hostPath"]["path"]
    args = compute(pod)["args"]
    assert args[args.index("--capabilities-seed") + 1] == volume["hostPath"]["path"]
    shared = render(node_capabilities_seed=True, capabilities_seed="/var/lib/kvpy/caps")
    assert "qemu-capabilities" not in {v["name"] for v in shared["spec"]["volumes"]}
    assert compute(shared)["args"][-1] == "/var/lib/kvpy/caps"
    assert "--capabilities-seed" not in compute(render())["args"]
