"""What "honoured exactly or refused at admission naming the field" means, checked for
every manifest under examples/ (tests/integration/conformance/test_examples.py runs it
through a real kube-apiserver with the webhooks; tests/unit/virt_api/admission/test_examples.py
runs the same admission functions in process).

- A document with the annotation `kubevirt-py.io/conformance-refused` must be refused,
  and the refusal must name every path listed there.
- Any other document must be admitted; a VMI (or a VM's VMI: its template expanded with
  the instancetype and preference of the same file) is then laid out as its launcher pod
  would see it, planned by the launcher, rendered by its XML builder, validated by
  `virt-xml-validate`, and its fields found in the XML and in the launcher pod.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from controller.services.volumes import Claim
from launcher import domxml, firmware
from launcher.disks import DiskContext
from launcher.plan import HostPaths, parse_vmi, plan_domain
from launcher.qemuns import QEMU_NS
from shared import podlayout
from shared.expansion import expand_spec
from shared.model import VirtualMachineInstance
from shared.model.instancetype import InstancetypeSpec, PreferenceSpec
from shared.model.quantity import parse_bytes
from tests.integration.conformance import guestchecks

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
REFUSED_ANNOTATION = "kubevirt-py.io/conformance-refused"
CLAIM_BYTES = 64 * 1024 * 1024
UID = "00000000-0000-4000-8000-0000000000c0"
# The spec keys the launcher pod takes as written (controller/services/scheduling.py).
POD_KEYS = (
    "affinity", "tolerations", "topologySpreadConstraints", "schedulerName",
    "priorityClassName", "hostname", "subdomain", "dnsPolicy", "dnsConfig",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Doc:
    """One document of one example file."""

    path: Path
    index: int
    obj: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(EXAMPLES)}#{self.index}"

    @property
    def refused_paths(self) -> tuple[str, ...]:
        annotations = self.obj.get("metadata", {}).get("annotations") or {}
        return tuple(str(annotations.get(REFUSED_ANNOTATION, "")).split())

    @property
    def key(self) -> tuple[str, str]:
        return self.obj["kind"], self.obj["metadata"]["name"]


def example_docs() -> list[Doc]:
    """Every document of every manifest under examples/, in a stable order."""
    docs = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for i, obj in enumerate(yaml.safe_load_all(path.read_text())):
            if obj:
                docs.append(Doc(path, i, obj))
    return docs


def refusal_problems(doc: Doc, message: str) -> list[str]:
    """Each expected path the refusal does not name."""
    return [f"{p} not named in: {message}" for p in doc.refused_paths if f"{p}:" not in message]


def vmi_of(
    admitted: Mapping[str, Any], same_file: Mapping[tuple[str, str], Any]
) -> dict[str, Any] | None:
    """The VMI an admitted object runs as (a VM's: its template, expanded with the
    instancetype and preference found among `same_file`'s admitted objects); None for
    kinds that run nothing."""
    kind, meta = admitted["kind"], admitted["metadata"]
    if kind == "VirtualMachineInstance":
        spec = admitted["spec"]
    elif kind == "VirtualMachine":
        vm_spec = admitted["spec"]
        it = _related(same_file, vm_spec.get("instancetype"), "VirtualMachineInstancetype")
        pref = _related(same_file, vm_spec.get("preference"), "VirtualMachinePreference")
        spec = expand_spec(
            vm_spec["template"].get("spec") or {},
            instancetype=InstancetypeSpec.from_dict(it["spec"]) if it else None,
            preference=PreferenceSpec.from_dict(pref["spec"]) if pref else None,
        )
    else:
        return None
    metadata = {"name": meta["name"], "namespace": meta.get("namespace") or "default", "uid": UID}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": metadata, "spec": spec}  # fmt: skip


def _related(same_file: Mapping[tuple[str, str], Any], matcher: Any, kind: str) -> Any:
    if not isinstance(matcher, Mapping):
        return None
    return same_file.get((str(matcher.get("kind") or kind), str(matcher.get("name"))))


def lay_out_pod(vmi: VirtualMachineInstance, root: Path) -> DiskContext:
    """What the launcher pod would hold for this VMI: copies of containerDisk and
    kernelBoot files (tiny qcow2s / stand-ins), claim and host-disk mounts, config-volume
    mounts; the launcher's private work dir."""
    ctx = DiskContext(
        work_dir=root / "private" / "disks",
        container_disks=root / "container-disks",
        vmi_disks=root / "private" / podlayout.VMI_DISKS_SUBDIR,
        claim_capacities={},
    )
    ctx.work_dir.mkdir(parents=True)
    capacities = {}
    for volume in vmi.spec.volumes:
        name = volume.name or ""
        if volume.container_disk is not None:
            _qcow2(ctx.container_disks / podlayout.disk_file(name))
        if volume.claim is not None or volume.host_disk is not None:
            ctx.mount_of(name).mkdir(parents=True)
            capacities[name] = CLAIM_BYTES
    for rel in (podlayout.kernel_file(), podlayout.initrd_file()):
        (ctx.container_disks / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.container_disks / rel).write_bytes(b"stand-in")
    return DiskContext(
        work_dir=ctx.work_dir,
        container_disks=ctx.container_disks,
        vmi_disks=ctx.vmi_disks,
        claim_capacities=capacities,
    )


def _qcow2(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "16M"], check=True)


async def domain_xml(raw_vmi: dict[str, Any], root: Path) -> tuple[VirtualMachineInstance, str]:
    """The launcher's own parse, plan and XML for this VMI, in a laid-out stand-in pod."""
    vmi = parse_vmi(raw_vmi)
    ctx = lay_out_pod(vmi, root)
    host = HostPaths(
        serial_log=root / "serial.log",
        console_socket=root / "console.sock",
        agent_socket=root / "agent.sock",
        partition=None,
        vnc_socket=root / "vnc.sock",  # as the launcher's: the display devices.video names
    )
    plan = await plan_domain(vmi, ctx=ctx, host=host, virt_type="qemu")
    return vmi, domxml.build(plan)


def schema_problems(xml: str, root: Path) -> list[str]:
    """libvirt's schema verdict on the XML."""
    path = root / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False
    )
    return [] if done.returncode == 0 else [f"virt-xml-validate: {done.stderr.strip()}"]


def launcher_pod(vmi: VirtualMachineInstance) -> dict[str, Any]:
    """The launcher pod the controller would create (claims bound, of CLAIM_BYTES)."""
    claims = {
        v.claim.claim_name or "": Claim(
            name=v.claim.claim_name or "",
            phase="Bound",
            volume_mode="Filesystem",
            request_bytes=CLAIM_BYTES,
            capacity_bytes=CLAIM_BYTES,
        )
        for v in vmi.spec.volumes
        if v.claim is not None
    }
    return TemplateService(TemplateConfig()).launcher_pod(vmi, claims=claims)


Check = Callable[[VirtualMachineInstance, ET.Element, dict[str, Any]], Iterator[str]]


def _platform(vmi: VirtualMachineInstance, dom: ET.Element, _: dict[str, Any]) -> Iterator[str]:
    domain = vmi.spec.domain
    if dom.findtext("memory") != str((domain.guest_memory_bytes() or 0) // 1024):
        yield f"memory {dom.findtext('memory')} KiB is not {domain.guest_memory()}"
    topo = dom.find("cpu/topology")
    cpu = domain.cpu
    want = {"sockets": cpu.sockets or 1, "cores": cpu.cores or 1, "threads": cpu.threads or 1}
    if topo is None or {k: int(topo.get(k, "0")) for k in want} != want:
        yield f"cpu topology is not {want}"
    machine = dom.find("os/type")
    if machine is None or machine.get("machine") != firmware.machine_type(vmi):
        yield f"machine type is not {firmware.machine_type(vmi)}"
    yield from _cpu_model(vmi, dom)
    efi = domain.firmware.efi
    loader = dom.find("os/loader")
    if (efi is None) != (loader is None):
        yield "os/loader does not follow firmware.bootloader.efi"
    if efi is not None and loader is not None:
        if loader.get("secure") != ("yes" if efi.secure else "no"):
            yield "loader secure does not follow efi.secureBoot"
        if dom.find("os/nvram") is None:
            yield "no nvram for an efi guest"
    if domain.features.smm_on != (dom.find("features/smm") is not None):
        yield "features/smm does not follow features.smm"
    if (domain.devices.rng is not None) != (dom.find("devices/rng") is not None):
        yield "devices/rng does not follow devices.rng"
    if domain.firmware.uuid is not None and dom.findtext("uuid") != domain.firmware.uuid:
        yield "uuid is not firmware.uuid"
    serial = dom.findtext("sysinfo/system/entry[@name='serial']")
    if serial != domain.firmware.serial:
        yield f"SMBIOS serial {serial!r} is not firmware.serial"


def _cpu_model(vmi: VirtualMachineInstance, dom: ET.Element) -> Iterator[str]:
    model = vmi.spec.domain.cpu.model
    cpu = dom.find("cpu")
    assert cpu is not None
    if model in ("host-model", "host-passthrough"):
        ok = cpu.get("mode") == model
    elif model:
        ok = cpu.get("mode") == "custom" and cpu.findtext("model") == model
    else:  # host-model when features need a model
        ok = cpu.get("mode") == ("host-model" if vmi.spec.domain.cpu.features else None)
    if not ok:
        yield f"cpu {cpu.attrib} {cpu.findtext('model')!r} is not cpu.model {model!r}"
    found = [(f.get("name"), f.get("policy")) for f in cpu.findall("feature")]
    wanted = [(f.name, f.policy or "require") for f in vmi.spec.domain.cpu.features]
    if found != wanted:
        yield f"cpu features {found} are not cpu.features {wanted}"


def _boot(vmi: VirtualMachineInstance, dom: ET.Element, _: dict[str, Any]) -> Iterator[str]:
    boot = vmi.spec.domain.kernel_boot
    if boot is None:
        return
    container = boot.container
    if container is not None and bool(container.kernel_path) != (dom.find("os/kernel") is not None):
        yield "os/kernel does not follow kernelBoot.container.kernelPath"
    if (dom.findtext("os/cmdline") or "") != (boot.kernel_args or ""):
        yield "os/cmdline is not kernelBoot.kernelArgs"


def _devices(vmi: VirtualMachineInstance, dom: ET.Element, _: dict[str, Any]) -> Iterator[str]:
    disks = vmi.spec.domain.devices.disks
    found = dom.findall("devices/disk")
    if len(found) != len(disks):
        yield f"{len(found)} disks in the XML for {len(disks)} in the spec"
    for disk, el in zip(disks, found, strict=False):
        target = el.find("target")
        if target is None or target.get("bus") != disk.effective_bus:
            yield f"disk {disk.name} is not on bus {disk.effective_bus}"
        if (el.get("device") == "cdrom") != disk.is_cdrom:
            yield f"disk {disk.name}: cdrom does not follow the spec"
    everything = vmi.spec.domain.devices.interfaces
    interfaces = tuple(i for i in everything if i.passt_binding is None)
    passt = [i.name for i in everything if i.passt_binding is not None]
    streams = [
        v.split(",id=")[1].split(",")[0].removeprefix("passt-")
        for a in dom.iter(f"{{{QEMU_NS}}}arg")
        if (v := a.get("value") or "").startswith("stream,")
    ]
    if streams != passt:
        yield f"passt interfaces {passt} but QEMU streams for {streams}"
    nics = dom.findall("devices/interface")
    if interfaces and len(nics) != len(interfaces):
        yield f"{len(nics)} interfaces in the XML for {len(interfaces)} in the spec"
    for iface, nic in zip(interfaces, nics, strict=False):
        model = nic.find("model")
        if model is None or model.get("type") != (iface.model or "virtio"):
            yield f"interface {iface.name} is not model {iface.model or 'virtio'}"


def _pod(vmi: VirtualMachineInstance, _: ET.Element, pod: dict[str, Any]) -> Iterator[str]:
    spec = vmi.to_dict()["spec"]
    for key in POD_KEYS:
        if key in spec and pod["spec"].get(key) != spec[key]:
            yield f"launcher pod {key} {pod['spec'].get(key)!r} is not spec.{key}"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if pod["spec"]["nodeSelector"].get(key) != value:
            yield f"launcher pod nodeSelector lacks {key}={value}"
    guest = vmi.spec.domain.guest_memory_bytes() or 0
    if parse_bytes(pod["spec"]["containers"][0]["resources"]["requests"]["memory"]) < guest:
        yield "launcher pod requests less memory than the guest has"


CHECKS: tuple[Check, ...] = (
    _platform, _boot, _devices, _pod, guestchecks.guest_devices, guestchecks.guest_clock_features,
)  # fmt: skip


def honoured_problems(vmi: VirtualMachineInstance, xml: str) -> list[str]:
    """Every field of the VMI that the XML or the launcher pod does not carry."""
    dom = ET.fromstring(xml)
    pod = launcher_pod(vmi)
    return [problem for check in CHECKS for problem in check(vmi, dom, pod)]
