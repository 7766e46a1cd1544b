"""The launcher's compute container, the parts that follow from the VMI and the
controller's config alone: its command line (launcher/config.py reads it) and its
requests and limits (guest memory + measured overhead, CPU, device resources)."""

from __future__ import annotations

from controller.config import TemplateConfig
from controller.errors import SyncError
from controller.services import dedicated
from controller.services.bindings import add_overhead
from controller.services.overhead import guest_request_bytes, memory_overhead_bytes
from shared import podlayout
from shared.labels import KVM_RESOURCE, TUN_RESOURCE, VSOCK_RESOURCE
from shared.model import ConditionReason, VirtualMachineInstance
from shared.model.errors import QuantityError
from shared.model.quantity import parse_millis

NODE_NAME_ENV = "NODE_NAME"


def notify_socket_path(notify_dir: str) -> str:
    """The launcher's --notify-socket, expanded by the kubelet from the pod's node name.

    The notify directory is a hostPath mounted at the same path inside the pod, so the
    handler (which listens there on the host) and the launcher agree on one path."""
    return f"{notify_dir.rstrip('/')}/$({NODE_NAME_ENV})/{podlayout.NOTIFY_SOCKET_NAME}"


def launcher_args(
    cfg: TemplateConfig, vmi: VirtualMachineInstance, launcher_grace: int
) -> list[str]:
    """The launcher's command line (launcher/config.py)."""
    args = [
        "--name", vmi.name,
        "--namespace", vmi.namespace,
        "--uid", vmi.uid,
        "--sockets-dir", podlayout.SOCKETS_DIR,
        "--private-dir", podlayout.PRIVATE_DIR,
        "--container-disks-dir", podlayout.CONTAINER_DISKS_DIR,
        "--notify-socket", notify_socket_path(cfg.notify_host_dir),
        "--grace-period-seconds", str(launcher_grace),
        "--virt-type", "auto" if cfg.use_emulation else "kvm",
        "--log-format", cfg.log_format,
    ]  # fmt: skip
    if cfg.kvm_probe_file:
        args += ["--kvm-probe-file", cfg.kvm_probe_file]
    if cfg.capabilities_seed:
        args += ["--capabilities-seed", cfg.capabilities_seed]
    elif cfg.node_capabilities_seed:
        args += ["--capabilities-seed", podlayout.QEMU_CAPABILITIES_SEED_DIR]
    return args


def compute_resources(
    config: TemplateConfig, vmi: VirtualMachineInstance
) -> dict[str, dict[str, str]]:
    """Requests and limits: guest memory + overhead, CPU, and the device resources."""
    domain = vmi.spec.domain
    try:
        guest = domain.guest_memory_bytes()
        req_mem = domain.resources.requests.memory_bytes() or guest
        lim_mem = domain.resources.limits.memory_bytes()
        cpu_req = domain.resources.requests.cpu
        cpu_lim = domain.resources.limits.cpu
        cpu_millis = parse_millis(cpu_req) if cpu_req is not None else None
    except QuantityError as e:
        raise SyncError(ConditionReason.INVALID_SPEC, str(e), requeue=False) from e
    if guest is None or req_mem is None:
        raise SyncError(ConditionReason.INVALID_SPEC, "the VMI sets no memory", requeue=False)
    req_mem = guest_request_bytes(
        guest=guest, requested=req_mem, overcommit_percent=config.memory_overcommit
    )
    overhead = memory_overhead_bytes(
        guest_bytes=guest,
        vcpus=domain.vcpus(),
        emulated=config.use_emulation,
        config=config.overhead,
    )
    if cpu_millis is None:
        cpu_millis = config.cpu_request_millis_per_vcpu * domain.vcpus()
    devices = {TUN_RESOURCE: "1"}
    if not config.use_emulation:
        devices[KVM_RESOURCE] = "1"
    if domain.devices.autoattach_vsock:
        devices[VSOCK_RESOURCE] = "1"
    counted = 0 if domain.resources.overcommit_guest_overhead else overhead
    requests = {"cpu": f"{cpu_millis}m", "memory": str(req_mem + counted), **devices}
    limits = dict(devices)
    if lim_mem is not None:
        limits["memory"] = str(lim_mem + overhead)
    if cpu_lim is not None:
        limits["cpu"] = str(cpu_lim)
    resources = add_overhead(
        {"requests": requests, "limits": limits}, config.binding_plugins, vmi
    )  # network binding plugins' computeResourceOverhead
    return dedicated.compute_resources(vmi, resources, overhead=overhead)
